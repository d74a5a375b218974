"""What each kind of request runs, beside the shared row: a job's run, a service's
Serve config and endpoint, and the tokens that invoke it."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from clusters.models.requests import ClusterRequest


class Job(models.Model):
    """The batch part of a job request: what it runs, and how its run went.

    One row per :class:`ClusterRequest` whose ``workload`` is ``job`` (same primary key).
    The request carries the shape, the queue and the state; this carries the entrypoint
    and ``runtime_env`` the RayJob is built from, the limits the user set, and what
    KubeRay reported of the run (Ray's job id and status, the RayCluster it made, the
    driver's message, start and end). ``host`` is set when the job runs on one of its
    owner's ready dev clusters instead of a Ray cluster of its own (then it takes no GPUs).
    ``log_tail`` keeps the end of the driver's output once the job finished, so its logs
    can be read after its pods are gone (NULL until it was read).
    """

    request = models.OneToOneField(
        ClusterRequest, on_delete=models.CASCADE, primary_key=True, related_name="job"
    )
    entrypoint = models.TextField()
    runtime_env = models.JSONField(default=dict, blank=True)
    active_deadline_seconds = models.PositiveIntegerField(null=True, blank=True)
    ttl_seconds_after_finished = models.PositiveIntegerField(default=0)
    host = models.ForeignKey(
        ClusterRequest,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="hosted_jobs",
        help_text="The dev cluster the job runs on, when it runs on an existing one.",
    )
    ray_job_id = models.CharField(max_length=128, blank=True)
    ray_cluster_name = models.CharField(max_length=128, blank=True)
    job_status = models.CharField(
        max_length=16, blank=True, help_text="Ray's status of the job (PENDING, RUNNING, ...)."
    )
    message = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    log_tail = models.TextField(null=True, blank=True)

    def __str__(self) -> str:
        return f"job {self.request_id}: {self.entrypoint[:40]}"


class Service(models.Model):
    """The serving part of a service request: its Serve config, how it is upgraded, and
    what KubeRay last reported of it.

    One row per :class:`ClusterRequest` whose ``workload`` is ``service`` (same primary
    key). The request carries the shape, the queue and the state; this carries the
    ``serveConfigV2`` YAML and the upgrade strategy the RayService is built from, and
    the applications' statuses, the active and pending RayClusters and whether an
    upgrade is in progress, as folded from the RayService's status.
    """

    request = models.OneToOneField(
        ClusterRequest, on_delete=models.CASCADE, primary_key=True, related_name="service"
    )
    serve_config = models.TextField(help_text="Ray Serve's config (serveConfigV2), as YAML.")
    upgrade_type = models.CharField(max_length=40, default="NewCluster")
    upgrade_options = models.JSONField(default=dict, blank=True)
    applications = models.JSONField(default=dict, blank=True)
    active_cluster = models.CharField(max_length=128, blank=True)
    pending_cluster = models.CharField(max_length=128, blank=True)
    upgrading = models.BooleanField(default=False)
    # An incremental upgrade's split by side ("active", "pending"): each cluster's
    # targetCapacity and trafficRoutedPercent as KubeRay reports them (empty: no split).
    traffic = models.JSONField(default=dict, blank=True)
    serve_endpoints = models.PositiveIntegerField(default=0)
    # The worker group's maxReplicas last written on ``capped_cluster`` (its guaranteed
    # size plus the growth admitted; null: not written yet).
    worker_cap = models.PositiveIntegerField(null=True, blank=True)
    capped_cluster = models.CharField(max_length=128, blank=True)
    public = models.BooleanField(
        default=False, help_text="Whether its endpoint answers callers without a token."
    )
    requests_total = models.PositiveBigIntegerField(
        default=0, help_text="Requests relayed through its endpoint (flushed from Redis)."
    )
    scale_to_zero = models.BooleanField(
        default=False,
        help_text="Whether it gives its GPUs back after a window without endpoint requests.",
    )
    scale_to_zero_after_minutes = models.PositiveIntegerField(
        default=30, help_text="The window without requests after which it scales to zero."
    )
    last_request_at = models.DateTimeField(
        null=True, blank=True, help_text="The last request relayed (flushed from Redis)."
    )
    woken_at = models.DateTimeField(
        null=True, blank=True, help_text="When a request woke it from zero (until it serves)."
    )

    def __str__(self) -> str:
        return f"service {self.request_id}"


class ServiceToken(models.Model):
    """A scoped token that may invoke one service's endpoint and nothing else.

    Stored as the SHA-256 digest of the secret (shown once at creation) and its first
    characters (``prefix``) to tell tokens apart in lists; revoking deletes the row.
    """

    service = models.ForeignKey(Service, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=64)
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}...)"
