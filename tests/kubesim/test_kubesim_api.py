"""Kubernetes API semantics through the official client: CRUD, resourceVersion conflicts,
Status bodies, selectors, pagination, patches, finalizers, cascading deletion, discovery."""

from __future__ import annotations

import json
import urllib.request

import pytest
from kubernetes import client
from kubesim_helpers import apply, container, get_rc, pod_manifest, raycluster

from kubesim import KubeSim


def status_of(exc: client.ApiException) -> dict:
    return json.loads(exc.body)


def test_version_and_discovery(sim: KubeSim, kube_api: client.ApiClient) -> None:
    info = client.VersionApi(kube_api).get_code()
    assert info.major == "1" and info.git_version.startswith("v1.33")
    groups = client.ApisApi(kube_api).get_api_versions()
    names = {g.name for g in groups.groups}
    assert {
        "ray.io",
        "kueue.x-k8s.io",
        "networking.k8s.io",
        "rbac.authorization.k8s.io",
        "scheduling.run.ai",
    } <= names
    ray = next(g for g in groups.groups if g.name == "ray.io")
    assert ray.preferred_version.version == "v1"
    core = client.CoreV1Api(kube_api).get_api_resources()
    by_name = {r.name: r for r in core.resources}
    assert by_name["pods"].namespaced and "po" in by_name["pods"].short_names
    assert not by_name["nodes"].namespaced
    assert "pods/status" in by_name
    with urllib.request.urlopen(sim.url + "/apis/ray.io/v1") as resp:
        doc = json.load(resp)
    rc = next(r for r in doc["resources"] if r["name"] == "rayclusters")
    assert rc["kind"] == "RayCluster" and rc["namespaced"] is True


def test_create_get_list_and_metadata(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "team-a", "labels": {"tenant": "a"}}})
    cm = core.create_namespaced_config_map(
        "team-a", {"metadata": {"name": "cfg"}, "data": {"k": "v"}}
    )
    assert cm.metadata.uid and cm.metadata.creation_timestamp
    # ConfigMaps have no generation on a real API server (no spec that controllers observe).
    assert cm.metadata.resource_version and cm.metadata.generation is None
    got = core.read_namespaced_config_map("cfg", "team-a")
    assert got.data == {"k": "v"} and got.metadata.uid == cm.metadata.uid
    nss = core.list_namespace(label_selector="tenant=a")
    assert [n.metadata.name for n in nss.items] == ["team-a"]
    assert nss.items[0].status.phase == "Active"


def test_already_exists_and_not_found_status_bodies(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "dup"}})
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_config_map("default", {"metadata": {"name": "dup"}})
    assert exc.value.status == 409
    body = status_of(exc.value)
    assert body["kind"] == "Status" and body["reason"] == "AlreadyExists"
    assert body["message"] == 'configmaps "dup" already exists'
    assert body["details"] == {"name": "dup", "kind": "configmaps"}
    with pytest.raises(client.ApiException) as exc:
        core.read_namespaced_pod("ghost", "default")
    assert exc.value.status == 404
    body = status_of(exc.value)
    assert body["reason"] == "NotFound" and body["message"] == 'pods "ghost" not found'
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_config_map("nowhere", {"metadata": {"name": "x"}})
    assert exc.value.status == 404
    assert status_of(exc.value)["message"] == 'namespaces "nowhere" not found'


def test_stale_update_conflicts(core: client.CoreV1Api) -> None:
    cm = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c"}, "data": {"n": "1"}}
    )
    first = cm.to_dict()
    updated = core.replace_namespaced_config_map(
        "c",
        "default",
        {
            "metadata": {"name": "c", "resourceVersion": cm.metadata.resource_version},
            "data": {"n": "2"},
        },
    )
    assert int(updated.metadata.resource_version) > int(cm.metadata.resource_version)
    with pytest.raises(client.ApiException) as exc:
        core.replace_namespaced_config_map(
            "c",
            "default",
            {
                "metadata": {"name": "c", "resourceVersion": first["metadata"]["resource_version"]},
                "data": {"n": "3"},
            },
        )
    assert exc.value.status == 409
    body = status_of(exc.value)
    assert body["reason"] == "Conflict"
    assert "the object has been modified" in body["message"]
    assert core.read_namespaced_config_map("c", "default").data == {"n": "2"}


def test_custom_object_invalid_names_the_field(custom: client.CustomObjectsApi) -> None:
    body = raycluster("bad")
    body["spec"]["workerGroupSpecs"][0]["replicas"] = "string"
    with pytest.raises(client.ApiException) as exc:
        custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", body)
    assert exc.value.status == 422
    st = status_of(exc.value)
    assert st["reason"] == "Invalid" and st["code"] == 422
    assert st["details"]["kind"] == "RayCluster" and st["details"]["group"] == "ray.io"
    cause = st["details"]["causes"][0]
    assert cause["field"] == "spec.workerGroupSpecs[0].replicas"
    assert cause["reason"] == "FieldValueTypeInvalid"
    assert st["message"].startswith(
        'RayCluster.ray.io "bad" is invalid: '
        'spec.workerGroupSpecs[0].replicas: Invalid value: "string"'
    )
    missing = raycluster("nohead")
    del missing["spec"]["headGroupSpec"]
    with pytest.raises(client.ApiException) as exc:
        custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", missing)
    cause = status_of(exc.value)["details"]["causes"][0]
    assert cause == {
        "reason": "FieldValueRequired",
        "message": "Required value",
        "field": "spec.headGroupSpec",
    }


def test_custom_object_defaults_and_pruning(custom: client.CustomObjectsApi) -> None:
    body = raycluster("pruned")
    del body["spec"]["workerGroupSpecs"][0]["replicas"]
    body["spec"]["notAField"] = True
    created = custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", body)
    assert "notAField" not in created["spec"]
    assert created["spec"]["workerGroupSpecs"][0]["replicas"] == 0  # the schema default


def test_strict_field_validation_refuses_unknown_fields(sim: KubeSim) -> None:
    body = raycluster("strict")
    body["spec"]["bogus"] = 1
    req = urllib.request.Request(
        sim.url + "/apis/ray.io/v1/namespaces/default/rayclusters?fieldValidation=Strict",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(req)
    assert exc.value.code == 400
    st = json.loads(exc.value.read())
    assert st["reason"] == "BadRequest" and 'unknown field "spec.bogus"' in st["message"]


def test_invalid_name_is_422(core: client.CoreV1Api) -> None:
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_config_map("default", {"metadata": {"name": "Bad_Name"}})
    assert exc.value.status == 422
    st = status_of(exc.value)
    assert st["details"]["causes"][0]["field"] == "metadata.name"


def test_label_and_field_selectors_and_pagination(core: client.CoreV1Api) -> None:
    for i in range(7):
        core.create_namespaced_config_map(
            "default",
            {
                "metadata": {
                    "name": f"cm-{i}",
                    "labels": {"tier": "a" if i % 2 else "b", "n": str(i)},
                }
            },
        )
    assert len(core.list_namespaced_config_map("default", label_selector="tier=a").items) == 3
    assert len(core.list_namespaced_config_map("default", label_selector="tier!=a").items) == 4
    assert len(core.list_namespaced_config_map("default", label_selector="n in (1,2,9)").items) == 2
    assert (
        len(core.list_namespaced_config_map("default", label_selector="tier,n notin (0)").items)
        == 6
    )
    assert len(core.list_namespaced_config_map("default", label_selector="!tier").items) == 0
    one = core.list_namespaced_config_map("default", field_selector="metadata.name=cm-3")
    assert [c.metadata.name for c in one.items] == ["cm-3"]
    seen, token = [], None
    while True:
        page = core.list_namespaced_config_map("default", limit=3, _continue=token)
        seen += [c.metadata.name for c in page.items]
        token = page.metadata._continue
        assert len(page.items) <= 3
        if not token:
            break
    assert seen == [f"cm-{i}" for i in range(7)]


def test_patches(core: client.CoreV1Api, custom: client.CustomObjectsApi) -> None:
    core.create_namespaced_pod("default", pod_manifest("p"))
    # strategic merge patch keeps other containers' fields, merges by name
    patched = core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"x": "1"}}})
    assert patched.metadata.labels == {"x": "1"}
    sm = core.patch_namespaced_pod(
        "p", "default", {"spec": {"containers": [{"name": "main", "image": "busybox:2"}]}}
    )
    assert sm.spec.containers[0].image == "busybox:2"
    assert sm.spec.containers[0].resources.limits["cpu"] == "1"
    # JSON merge patch on a custom object, as the gateway suspends a cluster
    apply(custom, raycluster("rc"))
    gen = get_rc(custom, "rc")["metadata"]["generation"]
    out = custom.patch_namespaced_custom_object(
        "ray.io", "v1", "default", "rayclusters", "rc", {"spec": {"suspend": True}}
    )
    assert out["spec"]["suspend"] is True and out["metadata"]["generation"] == gen + 1
    # JSON patch
    core.create_namespaced_config_map("default", {"metadata": {"name": "j"}, "data": {"a": "1"}})
    kube = core.api_client
    kube.call_api(
        "/api/v1/namespaces/{ns}/configmaps/{name}",
        "PATCH",
        path_params={"ns": "default", "name": "j"},
        header_params={"Content-Type": "application/json-patch+json"},
        body=[{"op": "add", "path": "/data/b", "value": "2"}],
        auth_settings=[],
        response_types_map={},
    )
    assert core.read_namespaced_config_map("j", "default").data == {"a": "1", "b": "2"}


def test_server_side_apply_creates_then_merges(custom: client.CustomObjectsApi) -> None:
    body = raycluster("ssa", labels={"app.kubernetes.io/managed-by": "gangway"})
    # Like a real API server, apply answers 201 when it creates; the official client maps
    # only 200 for this call, so it returns None then.
    assert apply(custom, body) is None
    created = get_rc(custom, "ssa")
    assert created["metadata"]["generation"] == 1
    rv = created["metadata"]["resourceVersion"]
    same = apply(custom, body)
    assert same["metadata"]["generation"] == 1
    body["spec"]["workerGroupSpecs"][0]["replicas"] = 0
    changed = apply(custom, body)
    assert changed["metadata"]["generation"] == 2
    assert int(changed["metadata"]["resourceVersion"]) > int(rv)
    assert changed["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gangway"


def test_status_subresource_is_separate(custom: client.CustomObjectsApi) -> None:
    apply(custom, raycluster("st", workers=0))
    rc = get_rc(custom, "st")
    rc["status"]["state"] = "hacked"
    rc["spec"]["suspend"] = False
    replaced = custom.replace_namespaced_custom_object(
        "ray.io", "v1", "default", "rayclusters", "st", rc
    )
    assert replaced["status"]["state"] == "ready"  # the main resource ignores status
    with pytest.raises(client.ApiException) as exc:
        custom.replace_namespaced_custom_object(
            "ray.io", "v1", "default", "rayclusters", "st", {**rc, "metadata": {"name": "st"}}
        )
    assert exc.value.status == 422  # custom objects need a resourceVersion to update


def test_finalizers_hold_deletion(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    )
    core.delete_namespaced_config_map("held", "default")
    held = core.read_namespaced_config_map("held", "default")
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(client.ApiException) as exc:
        core.read_namespaced_config_map("held", "default")
    assert exc.value.status == 404


def test_cascading_deletion_via_owner_references(core: client.CoreV1Api) -> None:
    owner = core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    for i in range(3):
        core.create_namespaced_config_map(
            "default", {"metadata": {"name": f"dep-{i}", "ownerReferences": [ref]}}
        )
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "orphan-dep", "ownerReferences": [ref]}}
    )
    core.delete_namespaced_config_map("owner", "default", propagation_policy="Foreground")
    names = {c.metadata.name for c in core.list_namespaced_config_map("default").items}
    assert not names & {"owner", "dep-0", "dep-1", "dep-2", "orphan-dep"}


def test_orphan_propagation_keeps_dependents(core: client.CoreV1Api) -> None:
    owner = core.create_namespaced_config_map("default", {"metadata": {"name": "o"}})
    core.create_namespaced_config_map(
        "default",
        {
            "metadata": {
                "name": "d",
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "o",
                        "uid": owner.metadata.uid,
                    }
                ],
            }
        },
    )
    core.delete_namespaced_config_map("o", "default", propagation_policy="Orphan")
    dep = core.read_namespaced_config_map("d", "default")
    assert not dep.metadata.owner_references


def test_namespace_deletion_removes_contents(
    core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    core.create_namespace({"metadata": {"name": "gone"}})
    core.create_namespaced_config_map("gone", {"metadata": {"name": "c"}})
    core.create_namespaced_secret("gone", {"metadata": {"name": "s"}, "data": {}})
    apply(custom, raycluster("rc", namespace="gone"))
    assert core.list_namespaced_pod("gone").items
    core.delete_namespace("gone")
    with pytest.raises(client.ApiException) as exc:
        core.read_namespace("gone")
    assert exc.value.status == 404
    assert not [
        p for p in core.list_pod_for_all_namespaces().items if p.metadata.namespace == "gone"
    ]
    assert not custom.list_cluster_custom_object("ray.io", "v1", "rayclusters")["items"]


def test_builtin_kinds_round_trip(kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    net = client.NetworkingV1Api(kube_api)
    rbac = client.RbacAuthorizationV1Api(kube_api)
    core.create_namespace({"metadata": {"name": "t"}})
    core.create_namespaced_service_account(
        "t", {"metadata": {"name": "ray"}, "automountServiceAccountToken": False}
    )
    core.create_namespaced_limit_range(
        "t",
        {
            "metadata": {"name": "lr"},
            "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}}]},
        },
    )
    net.create_namespaced_network_policy(
        "t", {"metadata": {"name": "deny"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}
    )
    rbac.create_namespaced_role(
        "t",
        {
            "metadata": {"name": "r"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        "t",
        {
            "metadata": {"name": "rb"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "ray", "namespace": "t"}],
        },
    )
    assert net.list_network_policy_for_all_namespaces().items[0].metadata.name == "deny"
    assert rbac.read_namespaced_role_binding("rb", "t").role_ref.name == "r"
    assert core.read_namespaced_service_account("ray", "t").automount_service_account_token is False
    with pytest.raises(client.ApiException) as exc:
        rbac.create_namespaced_role_binding("t", {"metadata": {"name": "norole"}})
    assert exc.value.status == 422


def test_pod_spec_is_immutable(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_manifest("imm"))
    with pytest.raises(client.ApiException) as exc:
        core.patch_namespaced_pod(
            "imm", "default", {"spec": {"containers": [container("main", cpu="2")]}}
        )
    assert exc.value.status == 422


def test_a_client_that_resets_its_connection_is_not_reported_as_a_server_error(
    sim: KubeSim, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket
    import struct
    import time

    conn = socket.create_connection((sim.host, sim.port))
    conn.sendall(b"GET /api/v1/namesp")  # half a request line, then a reset (RST)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()
    time.sleep(0.3)  # the server's connection thread meets the reset
    with urllib.request.urlopen(sim.url + "/api/v1/namespaces") as resp:
        assert resp.status == 200  # still serving
    assert "Traceback" not in capsys.readouterr().err
