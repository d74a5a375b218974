"""The platform's priority classes: the order waiting requests go in, and which of them
may preempt running ones, after notice (docs/preemption.md).
"""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from tenants.models.tenancy import dns_label_validator


class PriorityClass(models.Model):
    """A platform-defined priority class (docs/preemption.md): requests of a higher
    ``value`` go first, whatever their tenant's share; a class that ``may_preempt`` may
    take a running request of a lower class off its GPUs, after notice.

    Protection of what runs in it: none of its running requests is preempted before it
    has run ``min_run_seconds``, nor within ``checkpoint_grace_seconds`` of its last
    reported checkpoint; a preempted one gets ``notice_seconds`` between the notice and
    being stopped (``None``: the ``RECLAIM_GRACE_SECONDS`` setting). ``tenants``: who
    may pick it (none named: every tenant). One class is the default (``is_default``),
    the class of a request that names none. Its ``name`` is also the name of the Kueue
    WorkloadPriorityClass and the Kubernetes PriorityClass written to match.
    """

    name = models.CharField(max_length=40, unique=True, validators=[dns_label_validator])
    value = models.IntegerField(
        unique=True,
        validators=[MinValueValidator(-1_000_000), MaxValueValidator(1_000_000)],
        help_text="Higher goes first; between -1,000,000 and 1,000,000.",
    )
    description = models.CharField(max_length=200, blank=True, default="")
    may_preempt = models.BooleanField(
        default=False,
        help_text="Its waiting requests may preempt running requests of lower classes.",
    )
    min_run_seconds = models.PositiveIntegerField(
        default=0, help_text="A running request of this class is not preempted before this."
    )
    checkpoint_grace_seconds = models.PositiveIntegerField(
        default=0,
        help_text="Nor within this long after it last reported a checkpoint.",
    )
    notice_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(86_400)],
        help_text="Between the preemption notice and the stop: time to save a checkpoint "
        "(empty: the platform's RECLAIM_GRACE_SECONDS).",
    )
    is_default = models.BooleanField(default=False)
    tenants = models.ManyToManyField(
        "tenants.Tenant",
        blank=True,
        related_name="priority_classes",
        help_text="The tenants that may pick it (none: every tenant).",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-value"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"],
                condition=Q(is_default=True),
                name="one_default_priority_class",
                violation_error_message="Only one priority class can be the default.",
            ),
        ]

    def __str__(self) -> str:
        return self.name
