"""KubeRay's validation of a RayJob (``ValidateRayJobMetadata``, ``ValidateRayJobSpec``)
for the rules kubesim emulates, with KubeRay's messages."""

from __future__ import annotations

import re
from typing import Any

from kubesim.store import Obj

# KubeRay's MaxRayJobNameLength: the RayCluster limit (53) minus the "-xxxxx" it appends.
MAX_NAME = 47
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1035_ERROR = (
    "[a lowercase RFC 1035 label must consist of lower case alphanumeric characters or '-', "
    "start with an alphabetic character, and end with an alphanumeric character (e.g. "
    "'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')]"
)


def validate(rj: Obj) -> str | None:
    """KubeRay's ``ValidateRayJobMetadata`` and ``ValidateRayJobSpec``, for the rules
    kubesim emulates; the message."""
    name = rj["metadata"]["name"]
    meta_bad = "The RayJob metadata is invalid: RayJob name should "
    if len(name) > MAX_NAME:
        return meta_bad + f"be no more than {MAX_NAME} characters"
    if not DNS1035.match(name):
        return meta_bad + f"be a valid DNS1035 label: {DNS1035_ERROR}"
    return _validate_spec(rj.get("spec") or {})


def _validate_spec(spec: dict[str, Any]) -> str | None:
    bad = "The RayJob spec is invalid: "
    selector = spec.get("clusterSelector") or {}
    mode = spec.get("submissionMode") or "K8sJobMode"
    if spec.get("suspend") and not spec.get("shutdownAfterJobFinishes"):
        return bad + (
            "a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended"
        )
    if int(spec.get("ttlSecondsAfterFinished") or 0) < 0:
        return bad + "TTLSecondsAfterFinished must be a non-negative integer"
    if selector and spec.get("suspend"):
        return bad + "the ClusterSelector mode doesn't support the suspend operation"
    if not selector and not spec.get("rayClusterSpec"):
        return bad + "one of RayClusterSpec or ClusterSelector must be set"
    if selector and not selector.get("ray.io/cluster"):
        return "cluster name in ClusterSelector should not be empty"
    if selector and spec.get("backoffLimit") is not None and int(spec["backoffLimit"]) > 0:
        return bad + "BackoffLimit is incompatible with ClusterSelector mode"
    if mode == "InteractiveMode" and int(spec.get("backoffLimit") or 0) > 0:
        return bad + "BackoffLimit is incompatible with InteractiveMode"
    ads = spec.get("activeDeadlineSeconds")
    if ads is not None and int(ads) <= 0:
        return bad + "activeDeadlineSeconds must be a positive integer"
    prds = spec.get("preRunningDeadlineSeconds")
    if prds is not None and int(prds) <= 0:
        return bad + "preRunningDeadlineSeconds must be a positive integer"
    bl = spec.get("backoffLimit")
    if bl is not None and int(bl) < 0:
        return bad + "backoffLimit must be a positive integer"
    return None
