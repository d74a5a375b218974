"""The CRDs' CEL validation rules, from outside: every rule of every CRD kubesim serves has a
manifest that breaks it and a valid twin (tests/kubesim/corpus/cel, written by its
make_cases.py). kubectl and the official Python client must see each invalid one refused
with the rule's message in Kubernetes' wording and each twin accepted."""

from __future__ import annotations

import copy
import glob
import os
import re
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from kubesim import KubeSim
from tests.kubesim.conftest import KUBECTL

CORPUS = Path(__file__).parent / "corpus" / "cel"
CASES: list[dict[str, Any]] = yaml.safe_load((CORPUS / "cases.yaml").read_text())
BY_ID = {c["id"]: c for c in CASES}
CRD_DIR = Path(__file__).parents[2] / "kubesim" / "crds"
# The six objects issue 43 found accepted although Kueue's own rules refuse them.
ISSUE_CASES = [
    "clusterqueue-v1beta2-borrowing-without-cohort",
    "clusterqueue-v1beta2-covered-resources",
    "resourceflavor-v1beta2-taint-effect",
    "resourceflavor-v1beta2-topology-needs-labels",
    "clusterqueue-v1beta2-reclaim-never-borrow",
    "localqueue-v1beta2-clusterqueue",
]
OLD_KUBECTL = "/usr/bin/kubectl"

Run = Callable[..., subprocess.CompletedProcess[str]]


def _load(case: dict[str, Any], role: str) -> dict[str, Any] | None:
    path = CORPUS / case["id"] / f"{role}.yaml"
    return yaml.safe_load(path.read_text()) if path.exists() else None


def _refusal(case: dict[str, Any]) -> re.Pattern[str]:
    """The cause a refusal must carry: the rule's field, its type and its message (an
    evaluation error names the rule's message after ``evaluating rule:``)."""
    return re.compile(
        re.escape(case["field"])
        + r': Invalid value: "\w+": (.* evaluating rule: )?'
        + re.escape(case["message"])
    )


def _sim() -> Iterator[KubeSim]:
    s = KubeSim(startup_delay=0.0).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def cel_sim() -> Iterator[KubeSim]:
    """One simulator for the kubectl cases (each case names its own objects)."""
    yield from _sim()


@pytest.fixture(scope="module")
def client_sim() -> Iterator[KubeSim]:
    """Another for the Python client's cases, so that names do not meet."""
    yield from _sim()


def _kubectl(binary: str, sim: KubeSim, home: Path) -> Run:
    kubeconfig = sim.write_kubeconfig(str(home / "kubeconfig"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, KUBECONFIG=kubeconfig, HOME=str(home))
        return subprocess.run(
            [binary, "--cache-dir", str(home / "cache"), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    return run


def _target(manifest: dict[str, Any]) -> list[str]:
    """kubectl's arguments naming the object of a manifest."""
    group = manifest["apiVersion"].split("/")[0]
    meta = manifest["metadata"]
    args = [
        f"{manifest['kind'].lower()}.{manifest['apiVersion'].split('/')[1]}.{group}",
        meta["name"],
    ]
    if meta.get("namespace"):
        args += ["-n", meta["namespace"]]
    return args


def _exercise_kubectl(run: Run, case: dict[str, Any]) -> None:
    """Refused with the rule's message, then the valid twin accepted."""
    folder = CORPUS / case["id"]
    base = _load(case, "base")
    status_patch = ["--subresource=status", "--type=merge", "--patch-file"]
    if case["mode"] == "create":
        write = ["create", "-f"]
    elif case["mode"] == "update":
        assert base is not None
        done = run("apply", "-f", str(folder / "base.yaml"))
        assert done.returncode == 0, done.stderr
        write = ["apply", "-f"]
    else:
        assert base is not None
        done = run("create", "-f", str(folder / "base.yaml"))
        assert done.returncode == 0, done.stderr
        write = ["patch", *_target(base), *status_patch]
    if (folder / "base-status.yaml").exists():
        assert base is not None
        done = run("patch", *_target(base), *status_patch, str(folder / "base-status.yaml"))
        assert done.returncode == 0, done.stderr
    refused = run(*write, str(folder / "invalid.yaml"))
    assert refused.returncode != 0, f"accepted: {refused.stdout}"
    assert "is invalid" in refused.stderr, refused.stderr
    assert _refusal(case).search(refused.stderr), refused.stderr
    accepted = run(*write, str(folder / "valid.yaml"))
    assert accepted.returncode == 0, accepted.stderr


@pytest.mark.parametrize("case_id", sorted(BY_ID))
def test_kubectl_refuses_each_rule_and_accepts_its_twin(
    case_id: str, cel_sim: KubeSim, tmp_path: Path
) -> None:
    """kubectl (the pinned client) on every case of the corpus."""
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    _exercise_kubectl(_kubectl(str(KUBECTL), cel_sim, tmp_path), BY_ID[case_id])


@pytest.mark.parametrize("case_id", ISSUE_CASES)
def test_old_kubectl_sees_the_issue_cases_refused(case_id: str, tmp_path: Path) -> None:
    """The older kubectl (1.32) on the six objects the issue found accepted."""
    if not os.path.exists(OLD_KUBECTL):
        pytest.skip("no second kubectl")
    for sim in _sim():
        _exercise_kubectl(_kubectl(OLD_KUBECTL, sim, tmp_path), BY_ID[case_id])


def _plural(kind: str) -> str:
    lower = kind.lower()  # as every served custom kind's plural is made
    return lower[:-1] + "ies" if lower.endswith("y") else lower + "s"


class _Client:
    """The official client's CustomObjectsApi, addressed by manifest."""

    def __init__(self, api: client.CustomObjectsApi) -> None:
        self.api = api

    def _args(self, m: dict[str, Any]) -> tuple[str, str, str | None, str]:
        group, version = m["apiVersion"].split("/")
        return group, version, m["metadata"].get("namespace"), _plural(m["kind"])

    def create(self, m: dict[str, Any]) -> Any:
        group, version, ns, plural = self._args(m)
        if ns:
            return self.api.create_namespaced_custom_object(group, version, ns, plural, m)
        return self.api.create_cluster_custom_object(group, version, plural, m)

    def get(self, m: dict[str, Any]) -> Any:
        group, version, ns, plural = self._args(m)
        name = m["metadata"]["name"]
        if ns:
            return self.api.get_namespaced_custom_object(group, version, ns, plural, name)
        return self.api.get_cluster_custom_object(group, version, plural, name)

    def replace(self, m: dict[str, Any]) -> Any:
        group, version, ns, plural = self._args(m)
        body = copy.deepcopy(m)
        body["metadata"]["resourceVersion"] = self.get(m)["metadata"]["resourceVersion"]
        name = m["metadata"]["name"]
        if ns:
            return self.api.replace_namespaced_custom_object(group, version, ns, plural, name, body)
        return self.api.replace_cluster_custom_object(group, version, plural, name, body)

    def patch_status(self, m: dict[str, Any], patch: dict[str, Any]) -> Any:
        group, version, ns, plural = self._args(m)
        name = m["metadata"]["name"]
        return self.api.patch_namespaced_custom_object_status(
            group, version, ns, plural, name, patch
        )


def _status_body(exc: client.ApiException) -> dict[str, Any]:
    return yaml.safe_load(exc.body)


@pytest.mark.parametrize("case_id", sorted(BY_ID))
def test_python_client_gets_a_422_naming_the_rule(
    case_id: str, client_sim: KubeSim, tmp_path: Path
) -> None:
    """The official client: 422 Invalid with a cause on the rule's field, then the twin."""
    case = BY_ID[case_id]
    api = config.new_client_from_config(
        config_file=client_sim.write_kubeconfig(str(tmp_path / "kc"))
    )
    kube = _Client(client.CustomObjectsApi(api))
    base = _load(case, "base")
    invalid, valid = _load(case, "invalid"), _load(case, "valid")
    assert invalid is not None and valid is not None
    if base is not None:
        kube.create(base)
        status = _load(case, "base-status")
        if status is not None:
            kube.patch_status(base, status)
    write: Callable[[dict[str, Any]], Any] = {
        "create": kube.create,
        "update": kube.replace,
        "status": lambda patch: kube.patch_status(base or {}, patch),
    }[case["mode"]]
    with pytest.raises(client.ApiException) as refused:
        write(invalid)
    status_body = _status_body(refused.value)
    assert refused.value.status == 422
    assert status_body["reason"] == "Invalid"
    assert status_body["details"]["kind"] == case["kind"]
    causes = status_body["details"]["causes"]
    assert any(
        c["field"] == case["field"] and _refusal(case).search(f"{c['field']}: {c['message']}")
        for c in causes
    ), causes
    write(valid)
    api.close()


def _rules() -> Iterator[tuple[str, str, str]]:
    """(kind, version, message) of every rule in the served CRDs."""

    def walk(schema: Any) -> Iterator[str]:
        if not isinstance(schema, dict):
            return
        for rule in schema.get("x-kubernetes-validations") or []:
            yield rule.get("message") or rule["rule"]
        for sub in (schema.get("properties") or {}).values():
            yield from walk(sub)
        for key in ("items", "additionalProperties"):
            yield from walk(schema.get(key))

    for path in sorted(glob.glob(str(CRD_DIR / "*.yaml"))):
        crd = yaml.safe_load(Path(path).read_text())
        for version in crd["spec"]["versions"]:
            if version.get("served", True):
                for message in walk(version["schema"]["openAPIV3Schema"]):
                    yield crd["spec"]["names"]["kind"], version["name"], message


def test_every_rule_of_every_served_crd_has_a_case() -> None:
    """A rule a new CRD brings fails this until the corpus covers it."""
    rules = list(_rules())
    covered = [(c["kind"], c["version"], c["message"]) for c in CASES]
    assert Counter(covered) == Counter(rules)
    assert len(rules) == 105
