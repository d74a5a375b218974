"""The GPU catalogue: add, change and remove flavors (platform admins only)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError

from controlplane.exceptions import ServiceConflict
from tenants.audit import audit_record, audit_snapshot
from tenants.models import DeviceMode, GpuFlavor
from tenants.selectors import flavor_references
from tenants.services.edits import edit_and_audit
from tenants.services.guards import require_platform_admin

# A flavor's node facts, in the order the API shows them: what a platform admin may
# change on a flavor (its name is fixed once created).
FLAVOR_NODE_FACTS = (
    "gpu_product",
    "gpus_per_node",
    "cpu_per_node",
    "memory_per_node_gib",
    "node_count",
    "max_node_count",
    "sharing",
    "topology",
)
# How its GPUs are requested (tenants.models.DeviceMode; docs/dra.md).
FLAVOR_DEVICE_FACTS = ("device_mode", "device_class", "device_selector", "mig_profile")
FLAVOR_EDITABLE = frozenset(FLAVOR_NODE_FACTS + FLAVOR_DEVICE_FACTS)


@transaction.atomic
def flavor_create(
    *,
    actor: Any,
    name: str,
    gpu_product: str,
    gpus_per_node: int,
    cpu_per_node: int,
    memory_per_node_gib: int,
    node_count: int = 0,
    max_node_count: int | None = None,
    sharing: bool = False,
    device_mode: str = "extended",
    device_class: str = "",
    device_selector: str = "",
    mig_profile: str = "",
    topology: list[str] | None = None,
) -> GpuFlavor:
    """Add a GPU flavor to the catalogue (platform admins only)."""
    require_platform_admin(actor)
    flavor = GpuFlavor(
        name=name,
        gpu_product=gpu_product,
        gpus_per_node=gpus_per_node,
        cpu_per_node=cpu_per_node,
        memory_per_node_gib=memory_per_node_gib,
        node_count=node_count,
        max_node_count=max_node_count,
        sharing=sharing,
        device_mode=device_mode,
        device_class=device_class,
        device_selector=device_selector,
        mig_profile=mig_profile,
        topology=list(topology or []),
    )
    _check(flavor)
    try:
        with transaction.atomic():
            flavor.save()
    except IntegrityError as exc:  # created concurrently since full_clean looked
        raise ValidationError({"name": [f"A flavor named {name!r} already exists."]}) from exc
    audit_record(
        actor=actor,
        action="flavor.create",
        obj=flavor,
        data=audit_snapshot(flavor, ["name", *sorted(FLAVOR_EDITABLE)]),
    )
    return flavor


@transaction.atomic
def flavor_update(*, actor: Any, flavor: GpuFlavor, changes: Mapping[str, Any]) -> GpuFlavor:
    """Change a flavor's node facts (platform admins only); its name is immutable
    because quotas, clusters and Kubernetes labels refer to it."""
    require_platform_admin(actor)
    if "name" in changes and changes["name"] != flavor.name:
        raise ValidationError({"name": ["A flavor's name cannot be changed."]})
    unknown = sorted(set(changes) - FLAVOR_EDITABLE - {"name"})
    if unknown:
        raise ValidationError({key: ["This field cannot be changed."] for key in unknown})
    fields = sorted(set(changes) & FLAVOR_EDITABLE)
    _nodes_stay_per_member(flavor, changes)
    edit_and_audit(
        actor=actor,
        obj=flavor,
        changes=changes,
        fields=fields,
        check=_check,
        action="flavor.update",
    )
    if {"node_count", "max_node_count"} & set(fields):
        # Listed on one member at most (checked above): its stock is the flavor's counts.
        flavor.stock.update(node_count=flavor.node_count, max_node_count=flavor.max_node_count)
    return flavor


def _check(flavor: GpuFlavor) -> None:
    """The flavor's own rules, then what the queue mode cannot do with it."""
    flavor.full_clean()
    _kueue_counts_it_apart(flavor)


def _kueue_counts_it_apart(flavor: GpuFlavor) -> None:
    """Under Kueue (``QUEUE_MODE=kueue``), refuse a DRA flavor that claims from the same
    DeviceClass, on the same GPU product, as another DRA flavor: Kueue counts DRA devices
    per device class (its deviceClassMappings; kubernetes-sigs/kueue#10108) and tells
    flavors apart only by their nodes' labels, so it would charge one flavor's claims to
    the other's quota (a 1g.10gb slice against a 3g.40gb flavor, say)."""
    if settings.QUEUE_MODE != "kueue" or not flavor.uses_dra:
        return
    same_nodes = GpuFlavor.objects.filter(
        gpu_product=flavor.gpu_product, device_mode__in=[DeviceMode.DRA, DeviceMode.MIG]
    ).exclude(pk=flavor.pk)
    clash = next(
        (f for f in same_nodes.order_by("name") if f.dra_device_class == flavor.dra_device_class),
        None,
    )
    if clash is None:
        return
    field = "mig_profile" if flavor.device_mode == DeviceMode.MIG else "device_class"
    raise ValidationError(
        {
            field: [
                f"Under Kueue, flavor {clash.name} already claims {flavor.dra_device_class} "
                f"devices on {flavor.gpu_product} nodes, and Kueue counts DRA devices per "
                "device class (kubernetes-sigs/kueue#10108): it could not keep this "
                "flavor's quota apart from that one's. Use another device class or GPU "
                "product, or the built-in queue."
            ]
        }
    )


def _nodes_stay_per_member(flavor: GpuFlavor, changes: Mapping[str, Any]) -> None:
    """Refuse a change of the node counts of a flavor listed on several members of the
    fleet: its counts are their sums, set per member (clusters.members.stock). Listed on
    one member (every deployment from before the fleet), the flavor's counts are that
    member's, and the stock follows them there (clusters.members.stock keeps the two
    equal the other way)."""
    nodes = {k: changes[k] for k in ("node_count", "max_node_count") if k in changes}
    if not any(getattr(flavor, k) != v for k, v in nodes.items()):
        return
    # The reverse relation of clusters' FlavorStock: read without importing clusters.
    members = sorted(flavor.stock.values_list("kube_cluster__name", flat=True))
    if len(members) > 1:
        raise ValidationError(
            {
                key: [
                    f"{flavor.name} is listed on {len(members)} Kubernetes clusters "
                    f"({', '.join(members)}): its nodes are their sums; change them on "
                    "each cluster."
                ]
                for key in nodes
            }
        )


@transaction.atomic
def flavor_delete(*, actor: Any, flavor: GpuFlavor) -> None:
    """Remove a flavor nobody uses (platform admins only); a flavor still named by a
    quota or a cluster request is a conflict, since deleting it would orphan them."""
    require_platform_admin(actor)
    flavor = GpuFlavor.objects.select_for_update().get(pk=flavor.pk)
    quotas, clusters = flavor_references(flavor=flavor)
    if quotas or clusters:
        raise ServiceConflict(
            f"Flavor {flavor.name} is still used by {quotas} quota(s) and {clusters} "
            "cluster request(s); remove those first."
        )
    audit_record(actor=actor, action="flavor.delete", obj=flavor, data={"name": flavor.name})
    try:
        flavor.delete()
    except ProtectedError as exc:  # a reference created since the check above
        raise ServiceConflict(f"Flavor {flavor.name} is still in use.") from exc
