"""Validation helpers: built-in kinds with kubernetes-validate (strict), custom kinds with
jsonschema against the CRDs in ../shared/crds with unknown fields refused, and the
operators' rules that no schema carries."""

from __future__ import annotations

import copy
import functools
import os
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from clusters.domain.shapes import GROUP_NAME_RE, MAX_NAME_LENGTH, MAX_WORKER_GROUPS

CRD_DIR = Path(os.environ.get("GANGWAY_CRD_DIR", "/work/shared/crds"))
# The newest Kubernetes the installed kubernetes-validate ships schemas for.
K8S_VERSION = kubernetes_validate.latest_version()
CRD_FILES = {
    ("ray.io/v1", "RayCluster"): "ray.io_rayclusters.yaml",
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"): "kueue.x-k8s.io_resourceflavors.yaml",
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"): "kueue.x-k8s.io_clusterqueues.yaml",
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"): "kueue.x-k8s.io_localqueues.yaml",
    (
        "kueue.x-k8s.io/v1beta2",
        "WorkloadPriorityClass",
    ): "kueue.x-k8s.io_workloadpriorityclasses.yaml",
    ("kueue.x-k8s.io/v1beta2", "AdmissionCheck"): "kueue.x-k8s.io_admissionchecks.yaml",
    ("kueue.x-k8s.io/v1beta2", "MultiKueueCluster"): "kueue.x-k8s.io_multikueueclusters.yaml",
    ("kueue.x-k8s.io/v1beta2", "MultiKueueConfig"): "kueue.x-k8s.io_multikueueconfigs.yaml",
    ("kueue.x-k8s.io/v1beta2", "Topology"): "kueue.x-k8s.io_topologies.yaml",
    ("kueue.x-k8s.io/v1beta2", "Cohort"): "kueue.x-k8s.io_cohorts.yaml",
    ("scheduling.run.ai/v2", "Queue"): "scheduling.run.ai_queues.yaml",
    ("kai.scheduler/v1alpha1", "Topology"): "kai.scheduler_topologies.yaml",
}
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def close_schema(schema: Any) -> Any:
    """Refuse unknown fields: ``additionalProperties: false`` wherever a schema lists
    ``properties`` and does not preserve unknown fields (the CRDs allow them; we must not
    write them)."""
    if isinstance(schema, dict):
        out = {key: close_schema(value) for key, value in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        pattern = out.get("pattern")
        if isinstance(pattern, str) and pattern.startswith("^(?i)"):
            # Go's RE2 takes a flag group anywhere; Python's re only at the start.
            out["pattern"] = "(?i)^" + pattern.removeprefix("^(?i)")
        return out
    if isinstance(schema, list):
        return [close_schema(item) for item in schema]
    return schema


@functools.cache
def crd_schema(api_version: str, kind: str) -> dict[str, Any]:
    """The closed ``openAPIV3Schema`` of the served version ``api_version`` of ``kind``."""
    crd = yaml.safe_load((CRD_DIR / CRD_FILES[(api_version, kind)]).read_text())
    version = api_version.split("/")[1]
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version and v["served"]]
    schema = copy.deepcopy(served["schema"]["openAPIV3Schema"])
    return close_schema(schema)


@functools.cache
def crd_validator(api_version: str, kind: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(crd_schema(api_version, kind))


def validate_metadata(obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    assert set(meta) <= {"name", "namespace", "labels", "annotations"}, meta
    assert DNS_SUBDOMAIN.match(meta["name"]) and len(meta["name"]) <= 253, meta["name"]
    for key, value in meta.get("labels", {}).items():
        assert isinstance(value, str) and len(value) <= 63, (key, value)


def validate_object(obj: dict[str, Any]) -> None:
    """Validate one generated object, built-in or custom; raise on any problem."""
    key = (obj["apiVersion"], obj["kind"])
    if key in CRD_FILES:
        validate_metadata(obj)
        crd_validator(*key).validate(obj)
    else:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    if obj["kind"] == "RayCluster":
        check_raycluster_rules(obj)


def check_raycluster_rules(obj: dict[str, Any]) -> None:
    """KubeRay and Kueue rules the CRD schema does not carry."""
    name = obj["metadata"]["name"]
    assert len(name) <= MAX_NAME_LENGTH and re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", name)
    groups = obj["spec"]["workerGroupSpecs"]
    assert 1 <= len(groups) <= MAX_WORKER_GROUPS
    names = [g["groupName"] for g in groups]
    assert len(set(names)) == len(names) and "head" not in names
    for group in groups:
        assert GROUP_NAME_RE.match(group["groupName"]), group["groupName"]
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    params = [obj["spec"]["headGroupSpec"]["rayStartParams"]] + [
        g["rayStartParams"] for g in groups
    ]
    assert all(isinstance(v, str) for p in params for v in p.values())
