"""Port-forwards and SSH sessions opened to a cluster through the product."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from clusters.models.requests import ClusterRequest


class Tunnel(models.Model):
    """One TCP connection carried to a cluster's head through the product (``gangway
    port-forward`` or ``gangway ssh``): who, which port, when it opened and closed, and the
    bytes each way. Open rows (``closed_at`` empty, seen within the heartbeat) are use
    of the cluster for idle detection (clusters/engine/tunnel_activity.py)."""

    cluster = models.ForeignKey(ClusterRequest, on_delete=models.CASCADE, related_name="tunnels")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    username = models.CharField(max_length=150)
    port = models.PositiveIntegerField()
    purpose = models.CharField(max_length=16, default="port-forward")
    opened_at = models.DateTimeField(auto_now_add=True)
    seen_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    bytes_in = models.BigIntegerField(default=0)
    bytes_out = models.BigIntegerField(default=0)
    close_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        indexes = [models.Index(fields=["cluster", "closed_at"], name="tunnel_cluster_open")]

    def __str__(self) -> str:
        return f"{self.username} to {self.cluster}:{self.port} ({self.purpose})"
