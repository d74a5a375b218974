"""The kubectl binary against kubesim: get, apply, describe, delete."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import yaml
from kubesim_helpers import raycluster

from kubesim import KubeSim

Kubectl = Callable[..., CompletedProcess[str]]


def test_get_nodes(kubectl: Kubectl) -> None:
    out = kubectl("get", "nodes").stdout
    lines = out.strip().splitlines()
    assert lines[0].split()[:2] == ["NAME", "STATUS"]
    assert len(lines) == 12  # the header and the demo fleet's 11 nodes
    assert "demo-h100-0" in out and "Ready" in out
    labels = kubectl("get", "node", "demo-h100-0", "-o", "jsonpath={.metadata.labels}").stdout
    assert "NVIDIA-H100-80GB-HBM3" in labels


def test_apply_get_describe_delete_raycluster(
    kubectl: Kubectl, sim: KubeSim, tmp_path: Path
) -> None:
    manifest = tmp_path / "rc.yaml"
    body = raycluster("demo", workers=1)
    # Ask for a GPU product the fleet does not have: the worker must stay Pending.
    body["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] = {
        "nvidia.com/gpu.product": "NVIDIA-B200"
    }
    manifest.write_text(yaml.safe_dump(body))
    assert "raycluster.ray.io/demo created" in kubectl("apply", "-f", str(manifest)).stdout
    assert "demo" in kubectl("get", "rayclusters").stdout
    pods = kubectl("get", "pods", "-l", "ray.io/cluster=demo", "-o", "wide").stdout
    rows = pods.strip().splitlines()[1:]
    assert len(rows) == 2 and "Running" in pods and "Pending" in pods
    worker = next(
        p["metadata"]["name"]
        for p in sim.list("pods", "default")
        if p["metadata"]["labels"]["ray.io/node-type"] == "worker"
    )
    described = kubectl("describe", "pod", worker).stdout
    assert "FailedScheduling" in described
    assert "0/11 nodes are available" in described
    assert "didn't match Pod's node affinity/selector" in described
    assert "Controlled By:  RayCluster/demo" in described
    # re-apply of a change: a JSON merge patch for a custom kind
    body["spec"]["workerGroupSpecs"][0]["replicas"] = 0
    manifest.write_text(yaml.safe_dump(body))
    assert "configured" in kubectl("apply", "-f", str(manifest)).stdout
    assert (
        sim.get("rayclusters.ray.io", "default", "demo")["spec"]["workerGroupSpecs"][0]["replicas"]
        == 0
    )
    assert "deleted" in kubectl("delete", "raycluster", "demo").stdout
    assert "No resources found" in kubectl("get", "pods").stderr
    assert not sim.list("services", "default")


def test_apply_unknown_field_is_refused(kubectl: Kubectl, tmp_path: Path) -> None:
    body = raycluster("strict")
    body["spec"]["surprise"] = True
    manifest = tmp_path / "rc.yaml"
    manifest.write_text(yaml.safe_dump(body))
    proc = kubectl("apply", "-f", str(manifest), check=False)
    assert proc.returncode != 0
    assert 'unknown field "spec.surprise"' in proc.stderr


def test_apply_builtin_twice_uses_strategic_merge(
    kubectl: Kubectl, tmp_path: Path, sim: KubeSim
) -> None:
    manifest = tmp_path / "ns.yaml"
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "team"},
            "data": {"a": "1"},
        },
    ]
    manifest.write_text(yaml.safe_dump_all(docs))
    kubectl("apply", "-f", str(manifest))
    docs[1]["data"] = {"a": "2", "b": "3"}
    manifest.write_text(yaml.safe_dump_all(docs))
    kubectl("apply", "-f", str(manifest))
    assert sim.get("configmaps", "team", "cfg")["data"] == {"a": "2", "b": "3"}
    assert "cfg" in kubectl("get", "cm", "-n", "team").stdout
    kubectl("delete", "namespace", "team")
    assert sim.get("namespaces", "", "team") is None


def test_get_events_and_raycluster_columns(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "rc.yaml"
    manifest.write_text(yaml.safe_dump(raycluster("cols", workers=1)))
    kubectl("apply", "-f", str(manifest))
    out = kubectl("get", "raycluster", "cols").stdout
    header = out.splitlines()[0]
    assert "DESIRED WORKERS" in header and "GPUS" in header and "STATUS" in header
    assert "ready" in out.splitlines()[1]
    events = kubectl("get", "events").stdout
    assert "Scheduled" in events
