"""Server-side apply and field ownership in kubesim, seen by kubectl and the official
client: managedFields (Apply and Update managers, FieldsV1 with ``k:`` and ``v:`` keys),
409 conflicts worded as the API server words them, ``force``, fields an apply drops,
no ``generation`` on kinds that have none, and a ``kubectl diff`` without noise."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubesim_helpers import raycluster

Kubectl = Callable[..., CompletedProcess[str]]
APPLY = "application/apply-patch+yaml"


def _cm(value: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "default"},
        "data": {"key": value, **extra},
    }


def _apply(
    api: client.ApiClient, path: str, body: dict[str, Any], manager: str, force: bool = False
) -> dict[str, Any]:
    """PATCH ``path`` with an apply patch; the answer (raises ApiException)."""
    query = [("fieldManager", manager)] + ([("force", "true")] if force else [])
    response = api.call_api(
        path,
        "PATCH",
        query_params=query,
        header_params={"Content-Type": APPLY, "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
    )
    raw = response[0] if isinstance(response, tuple) else response
    return json.loads(raw.data)


def _managed(obj: dict[str, Any]) -> dict[tuple[str, str], Any]:
    return {(e["manager"], e["operation"]): e for e in obj["metadata"]["managedFields"]}


CM = "/api/v1/namespaces/default/configmaps/x"


def test_create_records_an_update_manager_and_no_generation(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl("create", "configmap", "x", "--from-literal=key=a")
    obj = json.loads(kubectl("get", "cm", "x", "-o", "json", "--show-managed-fields").stdout)
    assert "generation" not in obj["metadata"]
    entry = _managed(obj)[("kubectl-create", "Update")]
    assert entry["apiVersion"] == "v1" and entry["fieldsType"] == "FieldsV1"
    assert entry["fieldsV1"] == {"f:data": {".": {}, "f:key": {}}}
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(yaml.safe_dump(_cm("a")))
    same = kubectl("diff", "-f", str(manifest), check=False)
    assert same.returncode == 0 and same.stdout == "", same.stdout
    kubectl("create", "secret", "generic", "s", "--from-literal=k=v")
    kubectl("create", "namespace", "n1")
    for kind, name in (("secret", "s"), ("namespace", "n1"), ("serviceaccount", "default")):
        if kind == "serviceaccount":
            kubectl("create", "serviceaccount", "sa1")
            name = "sa1"
        meta = json.loads(kubectl("get", kind, name, "-o", "json").stdout)["metadata"]
        assert "generation" not in meta, kind
    kubectl("label", "cm", "x", "team=a")
    obj = json.loads(kubectl("get", "cm", "x", "-o", "json", "--show-managed-fields").stdout)
    assert _managed(obj)[("kubectl-label", "Update")]["fieldsV1"] == {
        "f:metadata": {"f:labels": {".": {}, "f:team": {}}}
    }


def test_a_second_manager_conflicts_until_it_forces(kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_config_map("default", _cm("a"), field_manager="kubectl")
    with pytest.raises(ApiException) as refused:
        _apply(kube_api, CM, _cm("b"), "other")
    assert refused.value.status == 409
    status = json.loads(refused.value.body)
    assert status["reason"] == "Conflict"
    assert status["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl" using v1: .data.key'
    )
    assert status["details"]["causes"] == [
        {
            "type": "FieldManagerConflict",
            "message": 'conflict with "kubectl" using v1',
            "field": ".data.key",
        }
    ]
    assert core.read_namespaced_config_map("x", "default").data == {"key": "a"}
    # The same value is shared, not a conflict.
    shared = _apply(kube_api, CM, _cm("a"), "other")
    managed = _managed(shared)
    assert managed[("other", "Apply")]["fieldsV1"] == {"f:data": {"f:key": {}}}
    assert "f:key" in managed[("kubectl", "Update")]["fieldsV1"]["f:data"]
    forced = _apply(kube_api, CM, _cm("b"), "other", force=True)
    assert forced["data"] == {"key": "b"}
    managed = _managed(forced)
    assert managed[("other", "Apply")]["fieldsV1"] == {"f:data": {"f:key": {}}}
    assert managed[("kubectl", "Update")]["fieldsV1"] == {"f:data": {}}


def test_kubectl_server_side_apply_conflict_and_force(kubectl: Kubectl, tmp_path: Path) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(yaml.safe_dump(_cm("a")))
    second.write_text(yaml.safe_dump(_cm("b")))
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", str(first)).stdout
    refused = kubectl(
        "apply", "--server-side", "--field-manager=helm", "-f", str(second), check=False
    )
    assert refused.returncode == 1
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .data.key' in refused.stderr
    kubectl(
        "apply", "--server-side", "--field-manager=helm", "--force-conflicts", "-f", str(second)
    )
    obj = json.loads(kubectl("get", "cm", "x", "-o", "json", "--show-managed-fields").stdout)
    assert obj["data"] == {"key": "b"}
    assert set(_managed(obj)) == {("helm", "Apply")}


def test_an_apply_removes_the_fields_it_no_longer_sends(kube_api: client.ApiClient) -> None:
    _apply(kube_api, CM, _cm("a", gone="1", kept="2"), "me")
    # Another manager co-owns ``kept``; ``gone`` is only mine.
    _apply(kube_api, CM, {**_cm("a"), "data": {"kept": "2"}}, "them")
    after = _apply(kube_api, CM, _cm("a"), "me")
    assert after["data"] == {"key": "a", "kept": "2"}
    assert _managed(after)[("me", "Apply")]["fieldsV1"] == {"f:data": {"f:key": {}}}


def test_associative_lists_and_sets(kube_api: client.ApiClient) -> None:
    path = "/api/v1/namespaces/default/services/web"

    def svc(port: int, name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "default", "finalizers": [f"x.io/{name}"]},
            "spec": {
                "selector": {"app": "web"},
                "ports": [{"name": name, "port": port, "protocol": "TCP"}],
            },
        }

    _apply(kube_api, path, svc(80, "http"), "a")
    both = _apply(
        kube_api,
        path,
        {**svc(443, "https"), "spec": {"ports": svc(443, "https")["spec"]["ports"]}},
        "b",
    )
    assert [p["port"] for p in both["spec"]["ports"]] == [80, 443]
    assert both["metadata"]["finalizers"] == ["x.io/http", "x.io/https"]
    fields = _managed(both)[("b", "Apply")]["fieldsV1"]
    assert fields == {
        "f:metadata": {"f:finalizers": {'v:"x.io/https"': {}}},
        "f:spec": {
            "f:ports": {
                'k:{"port":443,"protocol":"TCP"}': {
                    ".": {},
                    "f:name": {},
                    "f:port": {},
                    "f:protocol": {},
                }
            }
        },
    }
    with pytest.raises(ApiException) as refused:
        _apply(kube_api, path, {**svc(80, "web"), "metadata": {"name": "web"}}, "b")
    assert json.loads(refused.value.body)["message"] == (
        'Apply failed with 1 conflict: conflict with "a": .spec.ports[port=80,protocol="TCP"].name'
    )


def test_custom_objects_keep_generation_and_list_map_keys(kube_api: client.ApiClient) -> None:
    path = "/apis/ray.io/v1/namespaces/default/rayclusters/demo"
    body = raycluster("demo", workers=1)
    created = _apply(kube_api, path, body, "gangway", force=True)
    assert created["metadata"]["generation"] == 1
    fields = _managed(created)[("gangway", "Apply")]["fieldsV1"]
    head = fields["f:spec"]["f:headGroupSpec"]["f:template"]["f:spec"]["f:containers"]
    assert list(head) == ['k:{"name":"ray-head"}']
    assert "f:workerGroupSpecs" in fields["f:spec"]  # an atomic list: one leaf
    assert fields["f:spec"]["f:workerGroupSpecs"] == {}
    body["spec"]["workerGroupSpecs"][0]["replicas"] = 0
    changed = _apply(kube_api, path, body, "gangway", force=True)
    assert changed["metadata"]["generation"] == 2
    again = _apply(kube_api, path, body, "gangway", force=True)
    assert again["metadata"]["generation"] == 2
