"""GPUs a running request asks for beside those it holds: surges and growths."""

from __future__ import annotations

from decimal import Decimal

from django.db import models

from clusters.models.requests import ClusterRequest
from tenants.models import GpuFlavor


class QueuedGpus(models.Model):
    """GPUs (and CPU, memory) a running request asks for beside those it holds, queued
    by the admission pass: what they take, when asked and admitted, and their standing
    while they wait (a :class:`Surge` or a :class:`Growth`)."""

    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="+")
    gpus = models.DecimalField(max_digits=10, decimal_places=3)
    cpu = models.DecimalField(max_digits=12, decimal_places=3, default=Decimal("0"))
    memory_gib = models.DecimalField(max_digits=12, decimal_places=3, default=Decimal("0"))
    created_at = models.DateTimeField(auto_now_add=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    queue_position = models.PositiveIntegerField(null=True, blank=True)
    queue_reason = models.CharField(max_length=32, blank=True)
    queue_message = models.CharField(max_length=500, blank=True)
    queue_eta = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


class Surge(QueuedGpus):
    """GPUs a running request needs for a while beside those it holds: its surge.

    A kind records one when a change it is asked for needs a second gang of GPUs before
    the first gives its own back (a service's upgrade to a new Ray cluster). The admission
    pass sees a waiting surge as queued demand of its request (same tenant, owner, kind
    and priority) and writes its standing here; once admitted (``admitted_at``) it holds
    its GPUs like an admitted gang, with a usage span of its own, until the kind releases
    it (the row is deleted). ``purpose`` says what it is for in a word ("upgrade");
    ``change`` is the kind's own record of it (the shared code never reads it);
    ``applied_at`` is when the kind carried it out.
    """

    request = models.OneToOneField(
        ClusterRequest, on_delete=models.CASCADE, primary_key=True, related_name="surge"
    )
    purpose = models.CharField(
        max_length=40, default="surge", help_text="What it is for, as messages say it."
    )
    change = models.JSONField(default=dict, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"surge of {self.request_id}: {self.gpus} GPUs"


class Growth(QueuedGpus):
    """Workers a running request asks for beyond the guaranteed size it is charged at
    (a kind that grows, :attr:`~clusters.domain.workload_kinds.Kind.grows`): its growth.

    Waiting, the admission pass queues it as a gang of ``workers`` (its GPUs, CPU and
    memory) and writes its standing here; admitted (``admitted_at``), it holds them as
    borrowable GPUs that a reclaim takes back by shrinking the request (the row is
    deleted), never by evicting it.
    """

    request = models.OneToOneField(
        ClusterRequest, on_delete=models.CASCADE, primary_key=True, related_name="growth"
    )
    workers = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"growth of {self.request_id}: {self.workers} workers"
