"""GPU utilisation over time: one row per worker GPU per reading of the DCGM exporter."""

from __future__ import annotations

from django.db import models

from clusters.models.requests import ClusterRequest


class GpuSample(models.Model):
    """One GPU of one worker pod of a cluster, as the DCGM exporter read it at ``at``.

    Written by the activity pass (``clusters/engine/gpu_activity.py``) for every ready
    cluster it reads; kept ``GPU_SAMPLE_RETENTION_HOURS`` and shown on the cluster's page
    and API detail as utilisation over time per worker. The idle policy's GPU rule reads
    the newest ones.
    """

    cluster = models.ForeignKey(
        ClusterRequest, on_delete=models.CASCADE, related_name="gpu_samples"
    )
    at = models.DateTimeField()
    pod = models.CharField(max_length=253)
    gpu_uuid = models.CharField(max_length=64)
    utilization = models.PositiveSmallIntegerField(help_text="DCGM_FI_DEV_GPU_UTIL, percent.")
    memory_used_mib = models.PositiveIntegerField(help_text="DCGM_FI_DEV_FB_USED, MiB.")

    class Meta:
        indexes = [models.Index(fields=["cluster", "at"], name="gpu_sample_cluster_at")]

    def __str__(self) -> str:
        return f"{self.pod} {self.gpu_uuid}: {self.utilization}% at {self.at}"
