"""KubeRay v1.7.0's RayService samples (tests/kubesim/corpus/kuberay-v1.7.0/ray-service.*)
created with kubectl on a fresh kubesim each (demo fleet): each RayService reaches Ready,
or stays initializing for the reason written here."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest
import yaml

CORPUS = Path(__file__).parent / "corpus" / "kuberay-v1.7.0"
SAMPLES = sorted(p.name for p in CORPUS.glob("ray-service.*.yaml"))
# Samples whose RayService cannot become Ready on the demo fleet, and why: their GPU worker
# groups fit no node of it (a nodeSelector or affinity for accelerators the fleet lacks, or
# no toleration for its GPU nodes' nvidia.com/gpu taint), and their Serve deployments ask
# for GPUs, so the replicas wait for workers that never start.
NOT_READY = {
    "ray-service.high-throughput-gemma4.yaml": "GPU workers need an accelerator the fleet lacks",
    "ray-service.high-throughput-llm.yaml": "GPU workers need an accelerator the fleet lacks",
    "ray-service.llm-serve.yaml": "GPU workers fit no GPU node of the fleet",
}
Kubectl = Callable[..., CompletedProcess[str]]


def test_every_sample_is_covered() -> None:
    assert len(SAMPLES) == 15
    assert set(NOT_READY) <= set(SAMPLES)


@pytest.mark.parametrize("sample", SAMPLES)
def test_sample_reaches_ready_or_its_reason(sample: str, kubectl: Kubectl) -> None:
    docs = [d for d in yaml.safe_load_all((CORPUS / sample).read_text()) if d]
    services = [d["metadata"]["name"] for d in docs if d["kind"] == "RayService"]
    assert services
    # Kinds kubesim does not serve (Deployment, in the high-availability sample) are
    # refused by kubectl with "no matches for kind"; the rest is created.
    proc = kubectl("create", "-f", str(CORPUS / sample), check=False)
    for name in services:
        assert f"rayservice.ray.io/{name} created" in proc.stdout
        if sample not in NOT_READY:
            # The incremental-upgrade sample's replicas wait for the Ray autoscaler's
            # first pass (5 s) to add a worker: wait as a user would.
            kubectl("wait", "--for=condition=Ready", f"rayservice/{name}", "--timeout=60s")
        rs: dict[str, Any] = json.loads(kubectl("get", "rayservice", name, "-o", "json").stdout)
        conds = {c["type"]: (c["status"], c["reason"]) for c in rs["status"]["conditions"]}
        pending = json.loads(
            kubectl("get", "pods", "--field-selector=status.phase=Pending", "-o", "json").stdout
        )["items"]
        if sample in NOT_READY:
            assert conds["Ready"] == ("False", "Initializing"), NOT_READY[sample]
            apps = rs["status"]["pendingServiceStatus"]["applicationStatuses"]
            assert {a["status"] for a in apps.values()} == {"DEPLOYING"}
            messages = [
                d.get("message", "")
                for a in apps.values()
                for d in a["serveDeploymentStatuses"].values()
            ]
            assert any("taken more than 30s to be scheduled" in m for m in messages)
            assert pending and all(
                p["metadata"]["labels"]["ray.io/node-type"] == "worker" for p in pending
            )
        else:
            assert conds["Ready"] == ("True", "NonZeroServeEndpoints")
            assert conds["UpgradeInProgress"] == ("False", "NoPendingCluster")
            assert rs["status"]["numServeEndpoints"] >= 1
            out = kubectl("get", "rayservice", name).stdout.split("\n")[1].split()
            assert out[:2] == [name, "Running"]
