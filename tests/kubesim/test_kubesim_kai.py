"""KAI emulation: fractional GPU pods share a GPU; without KAI they stay Pending."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from kubesim_helpers import L4, container

from kubesim import KubeSim


def kai_pod(name: str, fraction: str | None = "0.5", memory_mib: str | None = None) -> dict:
    ann = {}
    if fraction:
        ann["gpu-fraction"] = fraction
    if memory_mib:
        ann["gpu-memory"] = memory_mib
    return {
        "metadata": {"name": name, "annotations": ann, "labels": {"kai.scheduler/queue": "team"}},
        "spec": {
            "schedulerName": "kai-scheduler",
            "nodeSelector": {"nvidia.com/gpu.product": L4},
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "containers": [container("c", cpu="1", memory="2Gi")],
        },
    }


@pytest.fixture
def kai_core() -> Iterator[client.CoreV1Api]:
    sim = KubeSim(kai=True).start()
    cfg = client.Configuration()
    cfg.host = sim.url
    api = client.ApiClient(cfg)
    yield client.CoreV1Api(api)
    api.close()
    sim.stop()


def test_fractions_share_one_gpu(kai_core: client.CoreV1Api) -> None:
    for i in range(2):
        kai_core.create_namespaced_pod("default", kai_pod(f"half-{i}"))
    a, b = (kai_core.read_namespaced_pod(f"half-{i}", "default") for i in range(2))
    assert a.status.phase == b.status.phase == "Running"
    assert a.spec.node_name == b.spec.node_name  # both halves on the same L4
    assert a.metadata.annotations["kubesim.io/gpu-index"] == "0"
    # 4 L4 nodes with one GPU each: 8 halves fit, the 9th does not
    for i in range(2, 8):
        kai_core.create_namespaced_pod("default", kai_pod(f"half-{i}"))
    kai_core.create_namespaced_pod("default", kai_pod("half-8"))
    late = kai_core.read_namespaced_pod("half-8", "default")
    assert late.status.phase == "Pending"
    assert "Insufficient nvidia.com/gpu" in late.status.conditions[0].message
    kai_core.delete_namespaced_pod("half-0", "default")
    assert kai_core.read_namespaced_pod("half-8", "default").status.phase == "Running"


def test_gpu_memory_annotation_and_whole_gpu_accounting(kai_core: client.CoreV1Api) -> None:
    # an L4 has 23034 MiB: 3 x 7000 MiB share one GPU
    for i in range(3):
        kai_core.create_namespaced_pod("default", kai_pod(f"m{i}", None, "7000"))
    nodes = {kai_core.read_namespaced_pod(f"m{i}", "default").spec.node_name for i in range(3)}
    assert len(nodes) == 1
    # the shared GPU counts as one whole GPU taken from that node
    whole = {
        "metadata": {"name": "whole"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": next(iter(nodes))},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [container("c", gpu=1)],
        },
    }
    kai_core.create_namespaced_pod("default", whole)
    assert kai_core.read_namespaced_pod("whole", "default").status.phase == "Pending"


def test_without_kai_pods_wait_with_an_event(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", kai_pod("nokai"))
    pod = core.read_namespaced_pod("nokai", "default")
    assert pod.status.phase == "Pending" and pod.spec.node_name is None
    ev = core.list_namespaced_event("default", field_selector="involvedObject.name=nokai")
    assert 'no scheduler named "kai-scheduler"' in ev.items[0].message
