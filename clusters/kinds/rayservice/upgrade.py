"""A service's upgrade to a new Ray cluster, and the surge it takes.

KubeRay brings a changed ``rayClusterConfig`` (a new image) up as a second, pending
RayCluster beside the one serving, switches traffic to it once it serves, and deletes the
old one. Those GPUs are the upgrade's surge (:mod:`clusters.rows.surges`): the update
records it with the change instead of applying the change; the admission pass queues,
charges and admits it as it does any gang; once admitted, :func:`surge_step` writes the
change on the row (the provision pass then applies the RayService); once the old cluster
is gone (KubeRay switched and its pods are gone) it releases the surge. A new Serve
config alone is applied in place by KubeRay and takes no surge. Every step reads the
rows again, so a crash between two of them is taken up by the next reconcile.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from clusters.domain import shapes
from clusters.domain.states import State
from clusters.kinds.rayservice import growth
from clusters.kinds.rayservice.spec import surge_workers
from clusters.models import ClusterRequest, Service, Surge
from clusters.queue.backends import queue_backend
from clusters.rows import enqueue, surges
from clusters.rows.spec import ClusterSpec
from clusters.rows.transitions import note

PURPOSE = "upgrade"
# Where the RayService exists, so that a change is applied to it at once.
APPLIED = frozenset({State.ADMITTED, State.STARTING, State.READY})


def takes_new_cluster(request: ClusterRequest, details: Service) -> bool:
    """Whether a new RayCluster spec brings a second cluster up beside the serving one
    now: KubeRay's zero-downtime upgrade (any strategy but ``None``) of a service with an
    active cluster. Before it has one, KubeRay replaces its pending cluster instead. Under
    Kueue none is recorded: Kueue admits the RayService's own pod sets and decides alone."""
    return (
        not queue_backend().provisions_queued
        and details.upgrade_type != "None"
        and request.state in (State.STARTING, State.READY)
        and bool(details.active_cluster)
    )


def surge_of(request: ClusterRequest) -> Surge | None:
    """The request's surge as loaded with it (``None``: none)."""
    try:
        return request.surge
    except Surge.DoesNotExist:
        return None


def carry_out(request: ClusterRequest, details: Service, change: dict[str, Any]) -> list[str]:
    """Write ``change`` (``serve_config``, ``image``) on the locked row and details, marked
    for the provision pass where the RayService exists; what changed, in words."""
    changed: list[str] = []
    config = change.get("serve_config")
    if config is not None and config != details.serve_config:
        details.serve_config = config
        details.save(update_fields=["serve_config"])
        changed.append("Serve config")
    image = change.get("image")
    if image and image != request.image:
        request.image = image
        changed.append(f"image {image}")
    if changed:
        if request.state in APPLIED:
            request.provision_requested_at = timezone.now()
            enqueue.provision_marked()
        request.save(update_fields=["image", "provision_requested_at", "updated_at"])
    return changed


def record(request: ClusterRequest, details: Service, change: dict[str, Any]) -> Surge:
    """Put the upgrade's surge in line: the GPUs of a second cluster of the service's
    shape, less the workers an incremental upgrade's new cluster may not add beyond the
    guaranteed size (:func:`surge_workers`; :func:`growth.write_pending_cap` holds it
    there)."""
    gpus, cpu, memory = request.gpus, request.cpu, request.memory_gib
    found = growth.bounds(request)
    if found is not None:
        low = found[0]
        fewer = low - surge_workers(str(details.upgrade_type), details.upgrade_options, low)
        spec = ClusterSpec.of(request)
        worker = shapes.worker_resources(
            kind=spec.kind, flavor=shapes.flavor_spec(spec.flavor), gpu_fraction=spec.gpu_fraction
        )
        gpus -= spec.worker_gpus() * fewer
        cpu -= worker.cpu * fewer
        memory -= worker.memory_gib * fewer
    return surges.record(
        request, gpus=gpus, cpu=cpu, memory_gib=memory, purpose=PURPOSE, change=change
    )


def surge_step(cluster: ClusterRequest, pods: list[dict[str, Any]] | None = None) -> None:
    """Move the service's surge on, if it has one: carry an admitted upgrade out; carry a
    waiting one out at once when it no longer needs a second cluster (the service went
    back through the queue); release an applied one once the old cluster is gone
    (``pods``: the service's pods this pass saw; ``None``: not known, nothing released)."""
    if surge_of(cluster) is None:
        return
    with transaction.atomic():
        surge = Surge.objects.select_for_update().filter(pk=cluster.pk).first()
        if surge is None:
            return
        row = ClusterRequest.objects.select_for_update(no_key=True).get(pk=cluster.pk)
        details = Service.objects.get(pk=cluster.pk)
        if surge.admitted_at is None:
            if not takes_new_cluster(row, details):
                changed = carry_out(row, details, surge.change)
                surge.delete()
                if changed:
                    note(row, reason="upgrade", message="new " + " and ".join(changed))
        elif surge.applied_at is None:
            surge.change = {**surge.change, "from_cluster": details.active_cluster}
            surge.save(update_fields=["change"])
            changed = carry_out(row, details, surge.change)
            surges.mark_applied(row)
            note(
                row,
                reason="upgrade",
                message="new " + " and ".join(changed or ["spec"]) + ": applying the upgrade",
            )
        elif pods is not None and switched(details, surge, pods):
            surges.release(
                row,
                message=f"upgrade finished: {details.active_cluster} serves and "
                f"{surge.change.get('from_cluster')} is gone; {surges.words(surge)} given back",
            )
        else:
            return
    for field in ("image", "provision_requested_at"):
        setattr(cluster, field, getattr(row, field))


def switched(details: Service, surge: Surge, pods: list[dict[str, Any]]) -> bool:
    """Whether KubeRay finished the upgrade the surge was for: another cluster is active,
    none is pending, and no pod of the old cluster is left."""
    old = surge.change.get("from_cluster")
    if not old or details.active_cluster in ("", old) or details.pending_cluster:
        return False
    return not any(
        ((p.get("metadata") or {}).get("labels") or {}).get("ray.io/cluster") == old for p in pods
    )
