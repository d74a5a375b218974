"""Earmarks for reclaimed capacity, and autoscaling clusters charged at their largest size.

Rows written before this migration charged an autoscaling production cluster for
``workers`` only, so it could grow past its tenant's quota, and left out the autoscaler's
sidecar on its head. Their ``gpus``, ``cpu`` and ``memory_gib`` are recomputed for
``max_workers`` plus the sidecar; a cluster holding GPUs whose charge grows gets its usage
span split now (the old one closed, a new one at the new charge) and an event saying so.
The arithmetic is frozen here (the old demand was linear in the worker count, with a head
of 2 CPU and 8 GiB; the sidecar asks 0.5 CPU and 0.5 GiB) so that later changes to
``clusters.shapes`` cannot change this step.
"""

from decimal import Decimal

from django.db import migrations, models
from django.db.models import Q
from django.utils import timezone

HEAD_CPU = Decimal("2")
HEAD_MEMORY_GIB = Decimal("8")
SIDECAR_CPU = Decimal("0.5")
SIDECAR_MEMORY_GIB = Decimal("0.5")


def charge_autoscaling_at_max(apps, schema_editor):  # type: ignore[no-untyped-def]
    ClusterRequest = apps.get_model("clusters", "ClusterRequest")
    ClusterEvent = apps.get_model("clusters", "ClusterEvent")
    UsageSpan = apps.get_model("clusters", "UsageSpan")
    now = timezone.now()
    rows = (
        ClusterRequest.objects.filter(kind="prod")
        .filter(Q(min_workers__isnull=False) | Q(max_workers__isnull=False))
        .exclude(state="deleted")
        .select_related("owner", "flavor")
    )
    for row in rows:
        low = row.workers if row.min_workers is None else row.min_workers
        high = row.workers if row.max_workers is None else row.max_workers
        if low == high or not row.workers:
            continue
        scale = Decimal(high) / Decimal(row.workers)
        gpus = row.gpus * scale
        cpu = HEAD_CPU + SIDECAR_CPU + (row.cpu - HEAD_CPU) * scale
        memory = HEAD_MEMORY_GIB + SIDECAR_MEMORY_GIB + (row.memory_gib - HEAD_MEMORY_GIB) * scale
        ClusterRequest.objects.filter(pk=row.pk).update(gpus=gpus, cpu=cpu, memory_gib=memory)
        if gpus == row.gpus or not row.holds_gpus:
            continue
        closed = UsageSpan.objects.filter(cluster_id=row.pk, ended_at__isnull=True).update(
            ended_at=now
        )
        if closed:
            UsageSpan.objects.create(
                tenant_id=row.tenant_id,
                cluster_id=row.pk,
                username=row.owner.username,
                flavor_name=row.flavor.name,
                kind=row.kind,
                gpus=gpus,
                started_at=now,
            )
        ClusterEvent.objects.create(
            cluster_id=row.pk,
            actor_name="system",
            from_state=row.state,
            to_state=row.state,
            reason="recharged",
            message=f"now charged for its largest size, {high} workers "
            f"({gpus.normalize():f} GPUs), since it may grow to it without asking",
        )


class Migration(migrations.Migration):
    dependencies = [
        ("clusters", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="clusterrequest",
            name="earmarked_at",
            field=models.DateTimeField(
                blank=True,
                help_text="Set while borrowed quota is being (or was) reclaimed for this "
                "queued request: what the reclaim frees is promised to it until it is "
                "admitted.",
                null=True,
            ),
        ),
        migrations.RunPython(charge_autoscaling_at_max, migrations.RunPython.noop),
    ]
