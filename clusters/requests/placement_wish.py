"""What a request may ask of placement: a member of the fleet or a region it may use, and
for a production gang, a level of its flavor's topology that all its workers share.

Checked when it is created (and by the dry-run, through the same check): a member the
tenant is not allowed on, or a region where it may use no member, is refused with a 400
rather than left to wait for ever. Whether it fits there now is admission's to say.
"""

from __future__ import annotations

from typing import Any

from clusters.models import KubeCluster
from tenants.models import GpuFlavor, Tenant


def _members_words() -> str:
    names = list(KubeCluster.objects.values_list("name", flat=True))
    return ", ".join(names) if names else "none"


def unknown_member_message(name: str) -> str:
    """The error for a cluster name that is no member of the fleet."""
    return (
        f"There is no Kubernetes cluster called {name!r} in the fleet (there are: "
        f"{_members_words()})."
    )


def _open_to(member: KubeCluster, tenant: Tenant) -> bool:
    allowed = list(member.allowed_tenants.all())
    return not allowed or any(t.pk == tenant.pk for t in allowed)


def placement_errors(*, tenant: Tenant, spec: Any) -> dict[str, list[str]]:
    """Why the placement ``spec`` asks for (``wanted_kube_cluster``, ``wanted_region``)
    is refused for ``tenant``, by field of the API's body (none: it is not)."""
    member: KubeCluster | None = spec.wanted_kube_cluster
    region: str = spec.wanted_region
    errors: dict[str, list[str]] = {}
    if member is not None:
        if not _open_to(member, tenant):
            errors["kube_cluster"] = [
                f"{tenant.slug} may not use the Kubernetes cluster {member.name!r}; leave "
                "kube_cluster out to let admission place it."
            ]
        elif region and member.region != region:
            errors["region"] = [
                f"The Kubernetes cluster {member.name!r} is in region "
                f"{member.region or '(none)'!r}, not {region!r}; give one or the other."
            ]
    elif region:
        members = KubeCluster.objects.filter(region=region).prefetch_related("allowed_tenants")
        if not any(_open_to(m, tenant) for m in members):
            regions = sorted(
                set(KubeCluster.objects.exclude(region="").values_list("region", flat=True))
            )
            errors["region"] = [
                f"{tenant.slug} may use no Kubernetes cluster in region {region!r} "
                f"(regions of the fleet: {', '.join(regions) or 'none'})."
            ]
    errors.update(topology_errors(spec))
    return errors


def topology_errors(spec: Any) -> dict[str, list[str]]:
    """Why the topology ``spec`` asks for is refused (none: it is not): only a production
    gang asks it, of a level every flavor it accepts has, in mode required or preferred."""
    level: str = getattr(spec, "topology_level", "") or ""
    mode: str = getattr(spec, "topology_mode", "") or ""
    if not level:
        if mode:
            return {"topology_mode": ["Name the level (topology_level) the mode is for."]}
        return {}
    if mode not in ("", "required", "preferred"):
        return {"topology_mode": ["Either required or preferred."]}
    if spec.kind != "prod":
        return {
            "topology_level": [
                "Only a production cluster's whole-node workers are kept together by "
                "topology; a dev cluster's single-GPU workers go wherever they fit."
            ]
        }
    flavors = [spec.flavor]
    if len(spec.flavor_names()) > 1:
        flavors = list(GpuFlavor.objects.filter(name__in=spec.flavor_names()))
    lacking = [f for f in flavors if level not in (f.topology or [])]
    if lacking:
        f = lacking[0]
        levels = ", ".join(f.topology or []) or "none: it has no topology"
        return {
            "topology_level": [
                f"{f.name} has no topology level {level!r} (its levels, coarse to fine: {levels})."
            ]
        }
    return {}
