"""KubeRay's and Kueue's own sample manifests (tests/kubesim/corpus, sources in its README)
created with kubectl on a fresh kubesim each, as their READMEs tell a user to: every object
of a kind kubesim serves must be accepted (CEL rules included); objects of kinds it does not
serve must be refused as Kubernetes refuses them, ``no matches for kind``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config, dynamic
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from kubesim import KubeSim
from tests.kubesim.conftest import KUBECTL

CORPUS = Path(__file__).parent / "corpus"
SAMPLES = sorted(
    str(p.relative_to(CORPUS))
    for folder in ("kuberay-v1.7.0", "kueue-v0.19.2")
    for p in (CORPUS / folder).glob("*.yaml")
)
# Samples that kubesim refuses for a reason of its own, not their validity (none now:
# the autoscaling RayJob sample is admitted as an elastic job).
REFUSED_ELSEWHERE: dict[str, str] = {}


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _exists(dyn: dynamic.DynamicClient, resource: Any, doc: dict[str, Any]) -> bool:
    meta = doc["metadata"]
    ns = (meta.get("namespace") or "default") if resource.namespaced else None
    if "name" not in meta:  # generateName: one object with that prefix
        items = resource.get(namespace=ns).items
        return any(i.metadata.name.startswith(meta["generateName"]) for i in items)
    try:
        resource.get(name=meta["name"], namespace=ns)
    except NotFoundError:
        return False
    return True


def outcome(sample: str, tmp_path: Path) -> dict[str, list[str]]:
    """Create one sample with kubectl on a fresh kubesim (with Kueue): its objects by what
    became of them, ``accepted``, ``not served`` or ``refused`` (each ``Kind/name: why``)."""
    assert KUBECTL is not None
    result: dict[str, list[str]] = {"accepted": [], "not served": [], "refused": []}
    with KubeSim(startup_delay=0.0, kueue=True) as sim:
        kubeconfig = sim.write_kubeconfig(str(tmp_path / "kubeconfig"))
        env = dict(os.environ, KUBECONFIG=kubeconfig, HOME=str(tmp_path))

        def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
            cache = str(tmp_path / "cache")
            return subprocess.run(
                [str(KUBECTL), "--cache-dir", cache, *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )

        api = config.new_client_from_config(config_file=kubeconfig)
        dyn = dynamic.DynamicClient(api)
        served, unserved = [], []
        for doc in _docs(CORPUS / sample):
            try:
                served.append(
                    (dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"]), doc)
                )
            except ResourceNotFoundError:
                unserved.append(doc)
        created = tmp_path / "served.yaml"
        created.write_text(yaml.safe_dump_all([d for _, d in served], sort_keys=False))
        stderr = kubectl("create", "-f", str(created)).stderr if served else ""
        for resource, doc in served:
            label = (
                f"{doc['kind']}/{doc['metadata'].get('name') or doc['metadata']['generateName']}"
            )
            if _exists(dyn, resource, doc):
                result["accepted"].append(label)
            else:
                result["refused"].append(f"{label}: {stderr.strip()}")
        if unserved:
            path = tmp_path / "unserved.yaml"
            path.write_text(yaml.safe_dump_all(unserved, sort_keys=False))
            # Client-side validation needs the kind's schema; the server is what must refuse.
            refused = kubectl("create", "--validate=false", "-f", str(path))
            for doc in unserved:
                want = f'no matches for kind "{doc["kind"]}" in version "{doc["apiVersion"]}"'
                why = "no matches for kind" if want in refused.stderr else refused.stderr
                result["not served"].append(f"{doc['kind']}/{doc['metadata']['name']}: {why}")
        api.close()
    return result


@pytest.mark.parametrize(
    "sample",
    [
        pytest.param(s, marks=pytest.mark.xfail(reason=REFUSED_ELSEWHERE[s], strict=True))
        if s in REFUSED_ELSEWHERE
        else s
        for s in SAMPLES
    ],
)
def test_sample_objects_of_served_kinds_are_accepted(sample: str, tmp_path: Path) -> None:
    """Every object of a served kind created; every other one refused by the server."""
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    got = outcome(sample, tmp_path)
    assert not got["refused"]
    assert all(line.endswith(": no matches for kind") for line in got["not served"]), got
    assert got["accepted"] or got["not served"]


def test_the_corpus_holds_the_samples_named_in_its_readme() -> None:
    """Each sample's source is written down."""
    readme = (CORPUS / "README.md").read_text()
    assert len(SAMPLES) == 99
    missing = [s for s in SAMPLES if Path(s).name not in readme]
    assert not missing
