"""What happened to requests and what they held: events, usage and idle spans, and
the admission passes that wait to be recorded."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from clusters.models.requests import ClusterKind, ClusterRequest
from tenants.models import Tenant, TenantOwned


class ClusterEvent(models.Model):
    """One state transition (or notable moment) of a cluster request, for its history."""

    cluster = models.ForeignKey(ClusterRequest, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(auto_now_add=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    actor_name = models.CharField(max_length=150, default="system")
    from_state = models.CharField(max_length=16, blank=True)
    to_state = models.CharField(max_length=16)
    reason = models.CharField(max_length=64)
    message = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.cluster}: {self.from_state} -> {self.to_state} ({self.reason})"


class GpuSpan(TenantOwned):
    """A stretch of time a cluster held GPUs (abstract): who and what, copied so that the
    ledger survives renames and deletions; open while ``ended_at`` is empty."""

    username = models.CharField(max_length=150)
    flavor_name = models.CharField(max_length=40)
    gpus = models.DecimalField(max_digits=10, decimal_places=3)
    started_at = models.DateTimeField(db_index=True)
    ended_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        abstract = True
        ordering = ["started_at", "id"]

    @staticmethod
    def one_open(name: str) -> models.UniqueConstraint:
        """At most one open span per cluster."""
        return models.UniqueConstraint(
            fields=["cluster"], condition=Q(ended_at__isnull=True), name=name
        )


class UsageSpan(GpuSpan):
    """One stretch of time during which a cluster held GPUs: the usage ledger.

    Opened when a request enters a quota-holding state (admission), closed when it leaves
    (suspension, deletion finished, failure). A suspended-then-resumed cluster has one
    span per admission; an admitted :class:`Surge` has its own (``surge``) beside it.
    GPU-hours are ``gpus x (ended_at or now - started_at)``.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="usage_spans")
    cluster = models.ForeignKey(
        ClusterRequest, on_delete=models.CASCADE, related_name="usage_spans"
    )
    kind = models.CharField(max_length=8, choices=ClusterKind.choices)
    surge = models.BooleanField(
        default=False, help_text="Held by the request's surge (Surge), beside its own GPUs."
    )

    class Meta(GpuSpan.Meta):
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "surge"],
                condition=Q(ended_at__isnull=True),
                name="one_open_span_each",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster}: {self.gpus} GPUs from {self.started_at}"


class IdleSpan(GpuSpan):
    """One stretch of time during which a cluster held GPUs and Ray showed it unused.

    Opened when the activity check first finds the cluster idle, back-dated to its last
    activity (never before its GPUs were taken); closed when it is in use again or gives
    its GPUs back. Usage reports subtract these from the usage spans to split GPU-hours
    into active and idle, so that a team lead sees what idleness costs.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="idle_spans")
    cluster = models.ForeignKey(ClusterRequest, on_delete=models.CASCADE, related_name="idle_spans")

    class Meta(GpuSpan.Meta):
        constraints = [GpuSpan.one_open("one_open_idle_span")]

    def __str__(self) -> str:
        return f"{self.cluster}: idle with {self.gpus} GPUs from {self.started_at}"


class PendingPass(models.Model):
    """A pass (admission, reconcile or provision) somebody asked for that has not started.

    One row per pass. A nudge sets ``requested_at`` only when it is empty, and only the
    nudge that set it sends a Celery message; the task empties it as it starts, before it
    reads anything. So a burst of nudges costs one message and one pass, yet every nudge
    is followed by a pass that starts after it — what the burst changed is never missed.
    A message lost after the claim leaves ``requested_at`` set, and the sweeper re-sends
    it once it is stale: the row is the outbox.

    ``started_at`` is when the last pass started. A pass asked for sooner than its
    interval after that (``ADMISSION_PASS_INTERVAL_SECONDS`` and the like) is
    sent to start when the interval ends: a stream of nudges then costs a bounded number
    of passes per second, each over a larger batch, while a nudge on a quiet system
    still starts a pass at once.
    """

    name = models.CharField(max_length=32, primary_key=True)
    requested_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} pass (requested {self.requested_at or 'never'})"
