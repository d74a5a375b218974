"""KubeRay's side of in-tree autoscaling (``spec.enableInTreeAutoscaling: true``), as
KubeRay v1.7 writes it: the ``autoscaler`` sidecar on the head pod (``BuildAutoscalerContainer``
plus the ``autoscalerOptions`` overrides), the head's service account, ``ray-logs`` volume and
``RAY_enable_autoscaler_v2`` variable, the ServiceAccount, Role and RoleBinding it creates for
the sidecar, and the spec checks of ``ValidateRayClusterSpec`` that concern autoscaling.

Simplified: token authentication (``authOptions``) and mTLS (``tlsOptions``) add nothing to
the sidecar here, as kubesim emulates neither.
"""

from __future__ import annotations

import copy
from typing import Any

from kubesim.store import Obj
from kubesim.util import get_path, owner_ref

CONTAINER = "autoscaler"
START_CMD = (
    "ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) "
    "--cluster-namespace $(RAY_CLUSTER_NAMESPACE)"
)
GEN_START_CMD = "KUBERAY_GEN_AUTOSCALER_START_CMD"
V2_ENV = "RAY_enable_autoscaler_v2"
LOG_VOLUME, LOG_MOUNT = "ray-logs", "/tmp/ray"
NEVER = (None, "", "Never")
# KubeRay's labels on the objects it makes for the sidecar.
CREATED_BY = {
    "app.kubernetes.io/name": "kuberay",
    "app.kubernetes.io/created-by": "kuberay-operator",
}


def enabled(spec: dict[str, Any]) -> bool:
    """``utils.IsAutoscalingEnabled``."""
    return spec.get("enableInTreeAutoscaling") is True


def explicit_version(spec: dict[str, Any]) -> str | None:
    """``autoscalerOptions.version`` (``v1``/``v2``), which is all KubeRay itself reads."""
    version = get_path(spec, "autoscalerOptions", "version")
    return str(version) if version else None


def check_name(name: str) -> str:
    """``utils.CheckName``: at most 50 characters (cut from the front), starting with a
    letter."""
    if len(name) > 50:
        name = name[len(name) - 50 :]
    if name and not name[0].isalpha():
        name = "r" + name[1:]
    return name


def service_account(rc: Obj) -> str:
    """The head's service account: the template's, else the cluster's name."""
    given = get_path(rc, "spec", "headGroupSpec", "template", "spec", "serviceAccountName")
    return str(given or rc["metadata"]["name"])


def _ray_env(container: dict[str, Any]) -> dict[str, str]:
    return {str(e.get("name")): str(e.get("value", "")) for e in container.get("env") or []}


def sidecar(rc: Obj, image: str) -> dict[str, Any]:
    """``BuildAutoscalerContainer`` with ``mergeAutoscalerOverrides`` applied."""

    def field(path: str) -> dict[str, Any]:
        # The API server defaults a fieldRef's apiVersion to v1.
        return {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}

    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "env": [
            {"name": "RAY_CLUSTER_NAME", "valueFrom": field("metadata.labels['ray.io/cluster']")},
            {"name": "RAY_CLUSTER_NAMESPACE", "valueFrom": field("metadata.namespace")},
            {"name": "RAY_HEAD_POD_NAME", "valueFrom": field("metadata.name")},
            {"name": "KUBERAY_CRD_VER", "value": "v1"},
            {"name": GEN_START_CMD, "value": START_CMD},
        ],
        "command": ["/bin/bash", "-c", "--"],
        "args": [START_CMD],
        "resources": {
            "limits": {"cpu": "500m", "memory": "512Mi"},
            "requests": {"cpu": "500m", "memory": "512Mi"},
        },
    }
    opts = get_path(rc, "spec", "autoscalerOptions", default={}) or {}
    for key in ("resources", "image", "imagePullPolicy", "securityContext"):
        if opts.get(key) is not None:
            container[key] = copy.deepcopy(opts[key])
    for key in ("env", "envFrom", "volumeMounts"):
        if opts.get(key):
            container[key] = container.get(key, []) + copy.deepcopy(opts[key])
    for key in ("command", "args"):
        if opts.get(key):
            container[key] = list(opts[key])
    return container


def _mount_logs(pod_spec: dict[str, Any], container: dict[str, Any]) -> None:
    """``addEmptyDir`` for the log volume the head and the sidecar share."""
    if any(m.get("mountPath") == LOG_MOUNT for m in container.get("volumeMounts") or []):
        return
    volumes = pod_spec.setdefault("volumes", [])
    if not any(v.get("name") == LOG_VOLUME for v in volumes):
        volumes.append({"name": LOG_VOLUME, "emptyDir": {}})
    container.setdefault("volumeMounts", []).append({"mountPath": LOG_MOUNT, "name": LOG_VOLUME})


def head_pod_spec(rc: Obj, pod_spec: dict[str, Any]) -> dict[str, Any]:
    """The head pod's spec with what in-tree autoscaling adds (``DefaultHeadPodTemplate``
    and ``BuildPod``); unchanged when autoscaling is off."""
    spec = rc.get("spec") or {}
    containers = pod_spec.get("containers") or []
    if not enabled(spec) or not containers:
        return pod_spec
    pod_spec["serviceAccountName"] = check_name(service_account(rc))
    ray = containers[0]
    side = sidecar(rc, str(ray.get("image", "")))
    containers.append(side)
    version = explicit_version(spec)
    if version in ("v1", "v2"):
        ray.setdefault("env", []).append(
            {"name": V2_ENV, "value": "true" if version == "v2" else "false"}
        )
    if version == "v2":
        pod_spec["restartPolicy"] = "Never"
    _mount_logs(pod_spec, ray)
    _mount_logs(pod_spec, side)
    return pod_spec


def worker_pod_spec(rc: Obj, pod_spec: dict[str, Any]) -> dict[str, Any]:
    """``DefaultWorkerPodTemplate``: workers never restart under autoscaler v2."""
    spec = rc.get("spec") or {}
    if enabled(spec) and explicit_version(spec) == "v2":
        pod_spec["restartPolicy"] = "Never"
    return pod_spec


def rbac_objects(rc: Obj) -> list[tuple[str, Obj]]:
    """(storage key, object) of the ServiceAccount, Role and RoleBinding KubeRay makes for
    the sidecar (``common/rbac.go``), owned by the RayCluster."""
    name, ns = rc["metadata"]["name"], rc["metadata"]["namespace"]
    labels = {"ray.io/cluster": name, **CREATED_BY}
    sa_name = service_account(rc)

    def meta(obj_name: str) -> dict[str, Any]:
        return {
            "name": check_name(obj_name),
            "namespace": ns,
            "labels": dict(labels),
            "ownerReferences": [owner_ref(rc)],
        }

    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(sa_name)}
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta(name),
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
            {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get", "patch"]},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta(name),
        "subjects": [{"kind": "ServiceAccount", "name": check_name(sa_name), "namespace": ns}],
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": check_name(name),
        },
    }
    return [
        ("serviceaccounts", sa),
        ("roles.rbac.authorization.k8s.io", role),
        ("rolebindings.rbac.authorization.k8s.io", binding),
    ]


def _group_error(spec: dict[str, Any], v2_env: str | None) -> str | None:
    """``validateWorkerGroupIdleTimeout``: a group's own idle timeout is for v2 only."""
    for g in spec.get("workerGroupSpecs") or []:
        name, idle = g.get("groupName", ""), g.get("idleTimeoutSeconds")
        if idle is None:
            continue
        if int(idle) < 0:
            return f"worker group {name}: idleTimeoutSeconds must be non-negative, got {idle}"
        if explicit_version(spec) != "v2" and v2_env not in ("1", "true"):
            return (
                f"worker group {name}: idleTimeoutSeconds is set, but autoscaler v2 is not "
                "enabled. Please set .spec.autoscalerOptions.version to 'v2' (or set "
                f"{V2_ENV} environment variable to 'true' in the head pod if using KubeRay "
                "< 1.4.0)"
            )
    return None


def _enabled_error(spec: dict[str, Any], v2_env: str | None) -> str | None:
    """The rules that hold only with the autoscaler on."""
    groups = spec.get("workerGroupSpecs") or []
    for g in groups:
        if g.get("suspend"):
            return (
                f"worker group {g.get('groupName', '')} cannot be suspended with Autoscaler enabled"
            )
    version = explicit_version(spec)
    if version and v2_env is not None:
        return (
            f"both .spec.autoscalerOptions.version and head Pod env var {V2_ENV} are set, "
            "please only use the former"
        )
    if version != "v2":
        return None
    if get_path(spec, "headGroupSpec", "template", "spec", "restartPolicy") not in NEVER:
        return "restartPolicy for head Pod should be Never or unset when using autoscaler V2"
    for g in groups:
        if get_path(g, "template", "spec", "restartPolicy") not in NEVER:
            return (
                f"restartPolicy for worker group {g.get('groupName', '')} should be Never or "
                "unset when using autoscaler V2"
            )
    return None


def spec_error(spec: dict[str, Any]) -> str | None:
    """The first autoscaling rule of ``ValidateRayClusterSpec`` the spec breaks, in
    KubeRay's words; None when it keeps them all."""
    containers = get_path(spec, "headGroupSpec", "template", "spec", "containers", default=[])
    v2_env = _ray_env(containers[0]).get(V2_ENV) if containers else None
    found = _group_error(spec, v2_env)
    if found:
        return found
    if not enabled(spec) and v2_env in ("1", "true"):
        return (
            f"environment variable {V2_ENV} cannot be set to '{v2_env}' when "
            "enableInTreeAutoscaling is false. Please set enableInTreeAutoscaling: true to use "
            "autoscaler v2"
        )
    found = _enabled_error(spec, v2_env) if enabled(spec) else None
    if found:
        return found
    opts = spec.get("autoscalerOptions") or {}
    idle = opts.get("idleTimeoutSeconds")
    if idle is not None and int(idle) < 0:
        return f"autoscalerOptions.idleTimeoutSeconds must be non-negative, got {idle}"
    if any(e.get("name") == GEN_START_CMD for e in opts.get("env") or []):
        return (
            f"autoscalerOptions.env must not contain {GEN_START_CMD}: it is managed by KubeRay "
            "and injected automatically into the autoscaler container"
        )
    return None
