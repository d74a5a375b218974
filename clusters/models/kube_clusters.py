"""The fleet: the Kubernetes clusters gangway places workloads on, and each one's share
of a GPU flavor's nodes (DESIGN "A fleet, not a cluster")."""

from __future__ import annotations

from django.core.validators import MaxValueValidator
from django.db import models

from tenants.models import GpuFlavor, Tenant, dns_label_validator


class Schedulable(models.TextChoices):
    """Whether admission may place new gangs on a Kubernetes cluster."""

    ACTIVE = "active", "Active"
    CORDONED = "cordoned", "Cordoned"  # no new placements; what runs stays
    DRAINING = "draining", "Draining"  # no new placements; what runs is moved or waited for


class DrainMode(models.TextChoices):
    """How a drain treats what runs on the member: each kind as its package says
    (``Kind.drain``), or every kind sent back to the queue (jobs too, restarted)."""

    DEFAULT = "default", "Each kind's own way"
    REQUEUE = "requeue", "Requeue everything, jobs too"


class KubeCluster(models.Model):
    """One Kubernetes cluster of the fleet: where its API server is, how gangway signs in
    to it, where it stands in the placement order, and what gangway last saw of it.

    Credentials are stored encrypted (``*_encrypted``: ciphertext of the settings' fleet
    key); ``from_settings`` is the cluster that ``settings.KUBECONFIG`` names, the one a
    deployment had before the fleet (its credentials stay in the kubeconfig file or the
    pod's service account). ``allowed_tenants`` empty means every tenant may use it.
    Admission considers clusters by ``placement_order`` (lowest first).
    """

    name = models.CharField(max_length=40, unique=True, validators=[dns_label_validator])
    server = models.URLField(max_length=500, blank=True)
    ca_data = models.TextField(blank=True, help_text="The API server's CA bundle (PEM).")
    insecure_skip_tls_verify = models.BooleanField(default=False)
    token_encrypted = models.TextField(blank=True, editable=False)
    client_certificate = models.TextField(blank=True, help_text="A client certificate (PEM).")
    client_key_encrypted = models.TextField(blank=True, editable=False)
    from_settings = models.BooleanField(
        default=False, help_text="Signs in with settings.KUBECONFIG (or in-cluster credentials)."
    )
    region = models.CharField(max_length=63, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    placement_order = models.PositiveIntegerField(
        default=100, validators=[MaxValueValidator(100_000)]
    )
    schedulable = models.CharField(
        max_length=10, choices=Schedulable.choices, default=Schedulable.ACTIVE
    )
    allowed_tenants = models.ManyToManyField(Tenant, blank=True, related_name="+")
    credentials_changed_at = models.DateTimeField(auto_now_add=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # What the last health check saw (the health beat task writes them).
    reachable = models.BooleanField(null=True, editable=False)
    api_latency_ms = models.FloatField(null=True, blank=True, editable=False)
    kubernetes_version = models.CharField(max_length=40, blank=True, editable=False)
    operators = models.JSONField(default=dict, blank=True, editable=False)
    health_message = models.CharField(max_length=500, blank=True, editable=False)
    checked_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_sync_at = models.DateTimeField(null=True, blank=True, editable=False)
    # What the engine's reconcile passes over it saw (clusters/engine/member_health.py):
    # since when they fail, how many in a row, since when it is marked unreachable, and
    # how long the last outage took to detect (first failed pass to unreachable).
    failing_since = models.DateTimeField(null=True, blank=True, editable=False)
    failed_passes = models.PositiveIntegerField(default=0, editable=False)
    unreachable_since = models.DateTimeField(null=True, blank=True, editable=False)
    detect_seconds = models.FloatField(null=True, blank=True, editable=False)
    # A drain (clusters/engine/member_drain.py): how, since when, and when the last
    # workload left. Empty ``drain_mode``: not draining.
    drain_mode = models.CharField(max_length=10, choices=DrainMode.choices, blank=True)
    drain_started_at = models.DateTimeField(null=True, blank=True, editable=False)
    drained_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Requests moved off it (requeued by a drain, or sent back to the queue while it is
    # unreachable) and not placed again yet, since when, and how long the last such
    # move took: from the drain's start or the outage's mark to the last one admitted.
    moving = models.JSONField(default=list, blank=True, editable=False)
    moving_since = models.DateTimeField(null=True, blank=True, editable=False)
    replace_seconds = models.FloatField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["placement_order", "name"]

    def __str__(self) -> str:
        return self.name


class FlavorStock(models.Model):
    """A GPU flavor's nodes in one Kubernetes cluster of the fleet: what the admin lists
    there and what gangway last saw. The flavor's own counts are the fleet's totals."""

    kube_cluster = models.ForeignKey(KubeCluster, on_delete=models.CASCADE, related_name="stock")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.CASCADE, related_name="stock")
    node_count = models.PositiveIntegerField(default=0, validators=[MaxValueValidator(100_000)])
    max_node_count = models.PositiveIntegerField(
        null=True, blank=True, validators=[MaxValueValidator(100_000)]
    )
    observed_free_gpus = models.PositiveIntegerField(null=True, blank=True, editable=False)
    observed_free_nodes = models.PositiveIntegerField(null=True, blank=True, editable=False)
    observed_nodes = models.PositiveIntegerField(null=True, blank=True, editable=False)
    # Where its whole free nodes are, per topology domain (as on GpuFlavor).
    observed_free_domains = models.JSONField(null=True, blank=True, editable=False)
    observed_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["kube_cluster__placement_order", "kube_cluster__name"]
        constraints = [
            models.UniqueConstraint(fields=["kube_cluster", "flavor"], name="one_stock_per_cluster")
        ]

    def __str__(self) -> str:
        return f"{self.flavor} in {self.kube_cluster}"


class MemberQuotaCap(models.Model):
    """A cap on a tenant's quota in one member of the fleet: at most ``gpus`` GPUs of
    ``flavor`` held there. The quota itself stays fleet-wide (tenants.Quota); without a
    cap the tenant may hold its whole quota on any member it may use."""

    kube_cluster = models.ForeignKey(
        KubeCluster, on_delete=models.CASCADE, related_name="quota_caps"
    )
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.CASCADE, related_name="+")
    gpus = models.PositiveIntegerField(validators=[MaxValueValidator(1_000_000)])

    class Meta:
        ordering = ["tenant__slug", "kube_cluster__placement_order", "flavor__name"]
        constraints = [
            models.UniqueConstraint(
                fields=["kube_cluster", "tenant", "flavor"], name="one_cap_per_member"
            )
        ]

    def __str__(self) -> str:
        return f"{self.tenant}: at most {self.gpus} {self.flavor} on {self.kube_cluster}"
