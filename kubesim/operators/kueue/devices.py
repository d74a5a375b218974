"""Kueue's DRA accounting (the ResourceClaimTemplate path, v0.19: beta, feature gate
``DynamicResourceAllocation``): each pod of a pod set is charged, under the logical
resource its Configuration's ``resources.deviceClassMappings`` maps a DeviceClass to,
the ``count`` of every ``exactly`` request of the ResourceClaimTemplates it claims from.

Kueue counts per device class, not per selector: two MIG profiles on ``mig.nvidia.com``
are one resource to it (kubernetes-sigs/kueue#10108). What it refuses (an unmapped class,
``allocationMode: All``, ``firstAvailable``, a claim by name, a missing template) leaves
the Workload inadmissible with its field error as the message.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

TEMPLATES = "resourceclaimtemplates.resource.k8s.io"
# Kueue's refusal of a pod that names a ResourceClaim (its workload controller's words).
NAMED_CLAIMS = "DynamicResourceAllocation feature does not support use of resource claims"
# apimachinery's IsQualifiedName: an optional DNS subdomain prefix and '/', then a name.
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_QUALIFIED = re.compile(rf"^({_PREFIX}/)?{_NAME}$")
MAX_MAPPINGS = 16
MAX_CLASSES = 8


def parse_mappings(config: dict[str, Any] | None) -> dict[str, str]:
    """DeviceClass -> logical resource from a Kueue Configuration's
    ``resources.deviceClassMappings``, checked as Kueue checks its configuration at start
    (a ValueError with its field errors: Kueue would not start)."""
    raw = get_path(config or {}, "resources", "deviceClassMappings", default=None) or []
    if not isinstance(raw, list):
        raise ValueError("resources.deviceClassMappings: Invalid value: must be a list")
    path = "resources.deviceClassMappings"
    errors: list[str] = []
    if len(raw) > MAX_MAPPINGS:
        errors.append(f"{path}: Too many: {len(raw)}: must have at most {MAX_MAPPINGS} items")
    out: dict[str, str] = {}
    names: set[str] = set()
    for i, mapping in enumerate(raw):
        at = f"{path}[{i}]"
        name = str((mapping or {}).get("name") or "")
        if not _QUALIFIED.match(name) or len(name) > 253:
            errors.append(f'{at}.name: Invalid value: "{name}": must be a qualified name')
        if name in names:
            errors.append(f'{at}.name: Duplicate value: "{name}"')
        names.add(name)
        classes = (mapping or {}).get("deviceClassNames") or []
        if not classes:
            errors.append(
                f"{at}.deviceClassNames: Required value: at least one device class name is required"
            )
        if len(classes) > MAX_CLASSES:
            errors.append(
                f"{at}.deviceClassNames: Too many: {len(classes)}: must have at most "
                f"{MAX_CLASSES} items"
            )
        for j, dc in enumerate(classes):
            dc = str(dc)
            if not _QUALIFIED.match(dc):
                errors.append(f'{at}.deviceClassNames[{j}]: Invalid value: "{dc}"')
            elif out.get(dc, name) != name:
                errors.append(
                    f'{at}.deviceClassNames[{j}]: Invalid value: "{dc}": device class already '
                    f"mapped to resource {out[dc]}"
                )
            else:
                out[dc] = name
    if errors:
        raise ValueError("; ".join(errors))
    return out


def pod_set_devices(
    cluster: ClusterView, namespace: str, index: int, ps: dict[str, Any]
) -> tuple[dict[str, int], str]:
    """Per pod of pod set ``ps`` (the ``index``-th of its Workload in ``namespace``): the
    devices it claims, as logical resource -> count, or ``{}`` and why Kueue refuses it."""
    spec = get_path(ps, "template", "spec", default={}) or {}
    claims = spec.get("resourceClaims") or []
    if not claims or not cluster.kueue.feature_gates.get("DynamicResourceAllocation"):
        return {}, ""
    if any(c.get("resourceClaimName") for c in claims):
        return {}, NAMED_CLAIMS
    mapped: dict[str, str] = cluster.kueue.device_classes
    out: dict[str, int] = {}
    for j, claim in enumerate(claims):
        name = claim.get("resourceClaimTemplateName")
        if not name:
            continue
        at = f"spec.podSets[{index}].template.spec.resourceClaims[{j}]"
        template = cluster.store.get(TEMPLATES, namespace, name)
        if template is None:
            return {}, (
                f"{at}: Internal error: failed to get claim spec for ResourceClaimTemplate "
                f"{name} in podset {ps.get('name')}: resourceclaimtemplates.resource.k8s.io "
                f'"{name}" not found'
            )
        requests = get_path(template, "spec", "spec", "devices", "requests", default=[]) or []
        for i, request in enumerate(requests):
            charged, refused = _charge(request, f"devices.requests[{i}]")
            if refused:
                field, body, detail = refused
                return {}, f"{at}.{field}: {body}: ResourceClaimTemplate {name}: {detail}"
            if charged is None:
                continue
            dc, count = charged
            if dc not in mapped:
                return {}, f'{at}.resourceClaimTemplateName.deviceClassName: Not found: "{dc}"'
            out[mapped[dc]] = out.get(mapped[dc], 0) + count
    return out, ""


def _charge(request: Obj, at: str) -> tuple[tuple[str, int] | None, tuple[str, str, str] | None]:
    """(device class, count) one request of a claim spec costs (None: nothing, an admin
    access request), or Kueue's field error (field, error type and value, detail) for a
    form it does not charge."""
    if request.get("firstAvailable") is not None:
        return None, (at, "Invalid value: null", "FirstAvailable device selection is not supported")
    exactly = request.get("exactly")
    if exactly is None:
        return None, (at, "Invalid value: null", "Exactly must be set if FirstAvailable is nil")
    if exactly.get("adminAccess"):
        return None, None
    mode = exactly.get("allocationMode") or "ExactCount"
    if mode != "ExactCount":
        detail = (
            "AllocationMode 'All' is not supported"
            if mode == "All"
            else f"unsupported allocation mode: {mode}"
        )
        return None, (f"{at}.exactly.allocationMode", f'Invalid value: "{mode}"', detail)
    return (str(exactly.get("deviceClassName") or ""), int(exactly.get("count") or 1)), None
