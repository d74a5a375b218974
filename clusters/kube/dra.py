"""Dynamic Resource Allocation (``resource.k8s.io/v1``) for DRA flavors: the
ResourceClaimTemplate a GPU worker group claims from, and the pod wiring that uses it.

Pure: a flavor's facts in, plain dicts out. Each worker pod gets one claim from its group's
template (the resourceclaim controller creates it with the pod and deletes it after), asking
for exactly the worker's GPUs of the flavor's DeviceClass that match its CEL selectors (a
MIG flavor's: its profile). Such a worker carries no ``nvidia.com/gpu`` limit: the scheduler
allocates the devices and NVIDIA's DRA driver hands the container exactly those
(docs/dra.md).
"""

from __future__ import annotations

from typing import Any

from clusters.domain.shapes import FlavorSpec

Manifest = dict[str, Any]

API_VERSION = "resource.k8s.io/v1"
# The name of the claim in the pod (spec.resourceClaims[].name, resources.claims[].name) and
# of the request inside it (status.allocation.devices.results[].request).
CLAIM = "gpus"
REQUEST = "gpus"


def template_name(object_name: str, group: str) -> str:
    """The ResourceClaimTemplate of one worker group of one Ray object."""
    return f"{object_name}-{group}-gpus"


def device_request(flavor: FlavorSpec, count: int) -> Manifest:
    """One request for exactly ``count`` devices of the flavor's class and selectors."""
    exactly: Manifest = {
        "deviceClassName": flavor.device_class,
        "allocationMode": "ExactCount",
        "count": count,
    }
    if flavor.device_selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in flavor.device_selectors]
    return {"name": REQUEST, "exactly": exactly}


def claim_template(
    *,
    name: str,
    namespace: str,
    labels: dict[str, str],
    claim_labels: dict[str, str] | None = None,
    flavor: FlavorSpec,
    count: int,
) -> Manifest:
    """The ResourceClaimTemplate whose claims give one worker ``count`` devices. Its
    claims carry ``claim_labels`` (the request's), so that which devices its workers got
    is read with one LIST by label."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(sorted(labels.items()))},
        "spec": {
            "metadata": {"labels": dict(sorted((claim_labels or {}).items()))},
            "spec": {"devices": {"requests": [device_request(flavor, count)]}},
        },
    }


def claim_from_template(pod_spec: Manifest, container: Manifest, template: str) -> None:
    """Make ``container`` of ``pod_spec`` use a claim made from ``template``."""
    pod_spec["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": template}]
    container.setdefault("resources", {})["claims"] = [{"name": CLAIM}]
