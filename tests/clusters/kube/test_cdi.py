"""The image, env and container_gpus parts of a manifest: the request's variables after
gangway's, the chosen image everywhere, and for container_gpus a CDI init container per
GPU worker that asks for the same GPUs, writes into an emptyDir the Ray container reads
read-only, and stays within Pod Security baseline (never restricted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import kubernetes_validate
import pytest
from hypothesis import assume, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from clusters.domain.environment import validate_env
from clusters.kinds.raycluster.manifests import raycluster
from clusters.kube import cdi
from clusters.kube.manifests import cluster_manifests, tenant_bundle
from tests.clusters.kube.schemas import K8S_VERSION, validate_object

pytestmark = pytest.mark.django_db

PROFILE = "profiles/gangway-podman.json"
# Pod Security baseline: capabilities a container may add.
BASELINE_CAPS = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip


def _pod(template: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "w", "namespace": "gw-acme", **template["metadata"]},
        "spec": template["spec"],
    }


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def baseline_violations(pod: dict[str, Any]) -> list[str]:
    """The Pod Security baseline controls a pod breaks (the ones a pod of ours could)."""
    spec = pod["spec"]
    faults = [f"host namespace {k}" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    faults += [f"hostPath volume {v['name']}" for v in spec.get("volumes", []) if "hostPath" in v]
    for c in _containers(spec):
        ctx = c.get("securityContext", {})
        if ctx.get("privileged"):
            faults.append(f"{c['name']} privileged")
        extra = set(ctx.get("capabilities", {}).get("add", [])) - BASELINE_CAPS
        if extra:
            faults.append(f"{c['name']} adds {sorted(extra)}")
        if ctx.get("seccompProfile", {}).get("type") == "Unconfined":
            faults.append(f"{c['name']} seccomp Unconfined")
        if any("hostPort" in p for p in c.get("ports", [])):
            faults.append(f"{c['name']} hostPort")
    return faults


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """Besides baseline's: no escalation, capabilities drop ALL and add at most
    NET_BIND_SERVICE, non-root, seccomp RuntimeDefault or Localhost."""
    faults = baseline_violations(pod)
    for c in _containers(pod["spec"]):
        ctx = c.get("securityContext", {})
        if ctx.get("allowPrivilegeEscalation") is not False:
            faults.append(f"{c['name']} may escalate privileges")
        caps = ctx.get("capabilities", {})
        if "ALL" not in caps.get("drop", []) or set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            faults.append(f"{c['name']} capabilities")
    return faults


# Every Ray container hears of a preemption through these (clusters/kube/preemption_pods.py;
# the endpoint only once the request is saved).
NOTICE_ENV = ["GANGWAY_PODINFO_ANNOTATIONS", "GANGWAY_PREEMPTION_URL"]


def _own(env: list[dict[str, str]]) -> list[dict[str, str]]:
    """The env without the preemption notice's channel."""
    return [e for e in env if e["name"] not in NOTICE_ENV]


def test_env_follows_gangways_own_in_head_and_workers(make_cluster: Any) -> None:
    cluster = make_cluster(env={"WANDB_MODE": "offline", "HF_HOME": "/data/hf"})
    spec = raycluster(cluster)["spec"]
    head = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert _own(head["env"]) == [
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
        {"name": "HF_HOME", "value": "/data/hf"},
        {"name": "WANDB_MODE", "value": "offline"},
    ]
    worker = spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    assert _own(worker["env"]) == _own(head["env"])[1:]
    assert worker["env"][-1]["name"] == "GANGWAY_PODINFO_ANNOTATIONS"
    validate_object(raycluster(cluster))


def test_no_env_changes_nothing(make_cluster: Any) -> None:
    worker = raycluster(make_cluster())["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert [e["name"] for e in worker["containers"][0]["env"]] == NOTICE_ENV[:1]
    assert "initContainers" not in worker


def test_the_chosen_image_is_used_everywhere(make_cluster: Any, settings: Any) -> None:
    other = "rayproject/ray:2.40.0-py310-gpu"
    settings.RAY_IMAGE_ALLOWLIST = [settings.RAY_IMAGE_DEFAULT, other]
    cluster = make_cluster(image=other)
    spec = raycluster(cluster)["spec"]
    assert spec["rayVersion"] == "2.40.0"
    images = {spec["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]}
    images |= {g["template"]["spec"]["containers"][0]["image"] for g in spec["workerGroupSpecs"]}
    assert images == {other}


@pytest.mark.parametrize("kind", ["dev", "prod"])
def test_container_gpus_adds_a_cdi_init_container(make_cluster: Any, kind: str) -> None:
    cluster = make_cluster(kind=kind, container_gpus=True)
    obj = raycluster(cluster, container_profile=PROFILE)
    validate_object(obj)
    group = obj["spec"]["workerGroupSpecs"][0]
    spec = group["template"]["spec"]
    (init,) = spec["initContainers"]
    (ray,) = spec["containers"]
    assert init["name"] == cdi.INIT_CONTAINER and init["image"] == ray["image"]
    # The same GPUs as the worker (the device manager hands them on), a small CPU slice.
    gpus = ray["resources"]["limits"]["nvidia.com/gpu"]
    assert init["resources"]["limits"]["nvidia.com/gpu"] == gpus == ("1" if kind == "dev" else "8")
    assert init["resources"]["limits"] == init["resources"]["requests"]
    assert group["rayStartParams"]["num-gpus"] == gpus
    # The spec goes into a pod-local emptyDir, read-only for Ray; podman is pointed at it.
    (volume,) = [v for v in spec["volumes"] if v["name"] == cdi.CDI_VOLUME]
    assert "emptyDir" in volume
    assert {"name": cdi.CDI_VOLUME, "mountPath": cdi.CDI_DIR} in init["volumeMounts"]
    assert {"name": cdi.CDI_VOLUME, "mountPath": cdi.CDI_DIR, "readOnly": True} in ray[
        "volumeMounts"
    ]
    assert {"name": "CONTAINERS_CONF_OVERRIDE", "value": f"{cdi.CDI_DIR}/containers.conf"} in ray[
        "env"
    ]
    # The init container is as hardened as any; the Ray container gets podman's needs.
    assert init["securityContext"]["allowPrivilegeEscalation"] is False
    assert init["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert ray["securityContext"]["seccompProfile"] == {
        "type": "Localhost",
        "localhostProfile": PROFILE,
    }
    pod = _pod(group["template"])
    kubernetes_validate.validate(pod, K8S_VERSION, strict=True)
    assert baseline_violations(pod) == []
    assert restricted_violations(pod) == [
        "ray-worker may escalate privileges",
        "ray-worker capabilities",
    ]


def test_the_head_never_gets_the_cdi_init_container(make_cluster: Any) -> None:
    head = raycluster(make_cluster(container_gpus=True), container_profile=PROFILE)["spec"][
        "headGroupSpec"
    ]["template"]["spec"]
    assert "initContainers" not in head
    assert restricted_violations(_pod({"metadata": {}, "spec": head})) == []


def test_a_job_gets_it_too(make_cluster: Any, settings: Any) -> None:
    from clusters.models import Job

    settings.CONTAINER_GPUS_SECCOMP_PROFILE = PROFILE
    cluster = make_cluster(workload="job", container_gpus=True, env={"A": "1"})
    cluster._job_details = Job(entrypoint="python x.py", runtime_env={})
    (rayjob,) = cluster_manifests(cluster)
    as_cluster = {**rayjob, "kind": "RayCluster", "spec": rayjob["spec"]["rayClusterSpec"]}
    validate_object(as_cluster)
    worker = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert worker["initContainers"][0]["name"] == cdi.INIT_CONTAINER


def test_without_a_profile_the_manifest_refuses(make_cluster: Any, settings: Any) -> None:
    settings.CONTAINER_GPUS_SECCOMP_PROFILE = ""
    with pytest.raises(ValueError, match="seccomp profile"):
        raycluster(make_cluster(container_gpus=True))


def test_the_namespace_enforces_the_tenants_level(acme: Any) -> None:
    def level() -> str:
        ns = tenant_bundle(acme, [], control_plane_namespace="gangway-system")[0]
        return str(ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"])

    assert level() == "baseline"
    acme.pod_security = "restricted"
    assert level() == "restricted"


def _fake_node(root: Path, gpus: dict[str, str]) -> None:
    """/proc/driver/nvidia/gpus and /dev of a node, as the NVIDIA runtime shows them."""
    for uuid, minor in gpus.items():
        where = root / "proc/driver/nvidia/gpus" / f"0000:{int(minor):02x}:00.0"
        where.mkdir(parents=True)
        (where / "information").write_text(
            f"Model: \t\t NVIDIA H100\nGPU UUID: \t {uuid}\nDevice Minor: \t {minor}\n"
        )
    (root / "dev").mkdir()
    for name in ("nvidiactl", "nvidia-uvm"):
        (root / "dev" / name).write_text("")


def _run_script(tmp_path: Path, visible: str) -> subprocess.CompletedProcess[str]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    env = {**os.environ, "NVIDIA_VISIBLE_DEVICES": visible}
    return subprocess.run(
        [sys.executable, "-c", cdi.SCRIPT, str(out), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_script_writes_a_cdi_spec_of_exactly_the_pods_gpus(tmp_path: Path) -> None:
    _fake_node(tmp_path, {"GPU-aaa": "0", "GPU-bbb": "3", "GPU-ccc": "5"})
    done = _run_script(tmp_path, "GPU-ccc,GPU-bbb")
    assert done.returncode == 0, done.stderr
    spec = json.loads((tmp_path / "out" / cdi.CDI_SPEC_FILE).read_text())
    assert spec["cdiVersion"] == "0.6.0" and spec["kind"] == "nvidia.com/gpu"
    nodes = {d["name"]: d["containerEdits"]["deviceNodes"] for d in spec["devices"]}
    assert nodes == {
        "0": [{"path": "/dev/nvidia5"}],
        "1": [{"path": "/dev/nvidia3"}],
        "all": [{"path": "/dev/nvidia5"}, {"path": "/dev/nvidia3"}],
    }
    # Only the control devices that exist; never a GPU the pod was not given.
    assert spec["containerEdits"]["deviceNodes"] == [
        {"path": "/dev/nvidiactl"},
        {"path": "/dev/nvidia-uvm"},
    ]
    conf = (tmp_path / "out" / "containers.conf").read_text()
    assert conf == f'[engine]\ncdi_spec_dirs = ["{tmp_path / "out"}"]\n'


@pytest.mark.parametrize("visible", ["", "all", "void", "GPU-zzz"])
def test_the_script_refuses_what_is_not_the_pods_own_list(tmp_path: Path, visible: str) -> None:
    _fake_node(tmp_path, {"GPU-aaa": "0"})
    done = _run_script(tmp_path, visible)
    assert done.returncode != 0 and not (tmp_path / "out" / cdi.CDI_SPEC_FILE).exists()


@given(
    env=st.dictionaries(
        st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True),
        st.text(max_size=20),
        max_size=8,
    ),
    kind=st.sampled_from(["dev", "prod"]),
    nested=st.booleans(),
)
@hypothesis_settings(max_examples=60, deadline=None)
def test_user_env_never_shadows_gangways_own(env: dict[str, str], kind: str, nested: bool) -> None:
    """Whatever env the rules let through, every container's variable names are unique,
    the head stays blind to GPUs and podman stays pointed at the pod's own spec."""
    assume(not validate_env(env)[1])
    cluster = SimpleNamespace(
        pk=7,
        name="c1",
        tenant=SimpleNamespace(slug="acme", namespace="gw-acme", pk=1),
        owner=SimpleNamespace(username="bob"),
        flavor=SimpleNamespace(
            name="h100",
            gpu_product="NVIDIA-H100-80GB-HBM3",
            gpus_per_node=8,
            cpu_per_node=128,
            memory_per_node_gib=1024,
            node_count=4,
            sharing=False,
        ),
        kind=kind,
        workers=1,
        min_workers=None,
        max_workers=None,
        gpu_fraction=None,
        image="",
        env=env,
        container_gpus=nested,
        accepted_flavors=[],
    )
    spec = raycluster(cluster, container_profile=PROFILE)["spec"]
    pods = [spec["headGroupSpec"]["template"]["spec"]] + [
        g["template"]["spec"] for g in spec["workerGroupSpecs"]
    ]
    for pod in pods:
        for c in _containers(pod):
            names = [e["name"] for e in c.get("env", [])]
            assert len(names) == len(set(names)), names
    head_env = spec["headGroupSpec"]["template"]["spec"]["containers"][0]["env"]
    assert head_env[0] == {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}
    worker = spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    if nested:
        assert worker["env"][0]["name"] == "CONTAINERS_CONF_OVERRIDE"
