"""``/openapi/v2`` and ``/openapi/v3`` as kubectl (1.37 and 1.32) and the official client read
them: ``kubectl explain`` on built-in and custom kinds, the fallback of kubectl's client-side
validation to v2 for kinds the server does not serve, and ETags."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubesim_helpers import raycluster

from kubesim import KubeSim

PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def raw(kube_api: client.ApiClient) -> Iterator[Callable[..., tuple[int, bytes, dict[str, str]]]]:
    """GET a path with the official client's ``call_api``: status, body and headers (a
    non-2xx status is the client's ApiException, turned back into its parts)."""

    def get(path: str, **headers: str) -> tuple[int, bytes, dict[str, str]]:
        try:
            resp = kube_api.call_api(
                path,
                "GET",
                header_params=headers,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
            )
        except ApiException as exc:
            return exc.status, (exc.body or b""), dict(exc.headers or {})
        return resp.status, resp.data, dict(resp.headers)

    yield get


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("pods.spec.containers", ["FIELD: containers <[]Container>", "image\t<string>"]),
        ("pods.spec.containers.resources", ["limits\t<map[string]Quantity>"]),
        ("jobs.spec.template.spec", ["FIELD: spec <PodSpec>", "restartPolicy\t<string>"]),
        ("services.spec.ports", ["targetPort\t<IntOrString>"]),
        ("rayclusters.spec.workerGroupSpecs", ["groupName\t<string>", "replicas\t<integer>"]),
        ("rayclusters.metadata", ["FIELD: metadata <ObjectMeta>", "labels\t<map[string]string>"]),
        ("workloads.status.conditions", ["lastTransitionTime\t<string> -required-"]),
    ],
)
def test_explain_built_in_and_custom_fields(
    kubectl_any: Run, field: str, expected: list[str]
) -> None:
    proc = kubectl_any("explain", field)
    assert proc.returncode == 0, proc.stderr
    for text in expected:
        assert text in proc.stdout, (text, proc.stdout[:2000])


def test_explain_from_the_v2_protobuf_document(kubectl_any: Run) -> None:
    proc = kubectl_any("explain", "pods.spec.containers", "--output", "plaintext-openapiv2")
    assert proc.returncode == 0, proc.stderr
    assert "RESOURCE: containers <[]Object>" in proc.stdout
    assert "imagePullPolicy\t<string>" in proc.stdout
    proc = kubectl_any("explain", "rayclusters.spec", "--output", "plaintext-openapiv2")
    assert proc.returncode == 0, proc.stderr
    assert "workerGroupSpecs\t<[]Object>" in proc.stdout


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [("example.com/v1", "Foo"), ("v1", "Foo"), ("ray.io/v1", "RayFoo")],
)
def test_apply_of_a_kind_not_served_says_no_matches(
    kubectl_any: Run, tmp_path: Path, api_version: str, kind: str
) -> None:
    manifest = tmp_path / "foo.yaml"
    manifest.write_text(
        json.dumps(
            {
                "apiVersion": api_version,
                "kind": kind,
                "metadata": {"name": "x", "namespace": "default"},
            }
        )
    )
    proc = kubectl_any("apply", "-f", str(manifest))
    assert proc.returncode != 0
    assert f'no matches for kind "{kind}" in version "{api_version}"' in proc.stderr
    assert "openapi" not in proc.stderr


def test_apply_and_diff_with_schemas(kubectl_any: Run, tmp_path: Path, sim: KubeSim) -> None:
    manifest = tmp_path / "rc.json"
    manifest.write_text(json.dumps(raycluster("schemas", workers=1)))
    proc = kubectl_any("apply", "-f", str(manifest))
    assert proc.returncode == 0, proc.stderr
    changed = raycluster("schemas", workers=2)
    manifest.write_text(json.dumps(changed))
    proc = kubectl_any("diff", "-f", str(manifest))
    assert proc.returncode == 1, proc.stderr  # 1: differences found
    removed = [line for line in proc.stdout.splitlines() if line.startswith("-")]
    added = [line for line in proc.stdout.splitlines() if line.startswith("+")]
    assert any(line.split() == ["-", "replicas:", "1"] for line in removed), proc.stdout
    assert any(line.split() == ["+", "replicas:", "2"] for line in added), proc.stdout


def test_v2_json_and_etag(raw: Callable[..., tuple[int, bytes, dict[str, str]]]) -> None:
    status, body, headers = raw("/openapi/v2", Accept="application/json")
    assert status == 200 and headers["Content-Type"] == "application/json"
    doc = json.loads(body)
    assert doc["swagger"] == "2.0"
    pod = doc["definitions"]["io.k8s.api.core.v1.Pod"]
    assert pod["properties"]["spec"]["$ref"] == "#/definitions/io.k8s.api.core.v1.PodSpec"
    rc = doc["definitions"]["io.ray.v1.RayCluster"]
    assert rc["x-kubernetes-group-version-kind"] == [
        {"group": "ray.io", "version": "v1", "kind": "RayCluster"}
    ]
    patch = doc["paths"]["/apis/ray.io/v1/namespaces/{namespace}/rayclusters/{name}"]["patch"]
    assert {"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": True} in (
        patch["parameters"]
    )
    refs: set[str] = set()
    _collect_refs(doc, refs)
    assert refs <= {f"#/definitions/{name}" for name in doc["definitions"]}
    etag = headers["Etag"]
    status, body, _ = raw("/openapi/v2", Accept="application/json", **{"If-None-Match": etag})
    assert status == 304 and body == b""
    status, _, _ = raw("/openapi/v2", Accept="text/html")
    assert status == 406


def test_v2_protobuf(raw: Callable[..., tuple[int, bytes, dict[str, str]]]) -> None:
    status, body, headers = raw("/openapi/v2", Accept=PROTOBUF)
    assert status == 200
    assert headers["Content-Type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    top = _fields(body)
    assert top[1] == [b"2.0"]  # Document.swagger
    names = {_fields(named)[1][0].decode() for named in _fields(top[9][0])[1]}
    assert {"io.k8s.api.core.v1.Pod", "io.ray.v1.RayCluster", "io.k8s.api.batch.v1.Job"} <= names
    json_etag = raw("/openapi/v2", Accept="application/json")[2]["Etag"]
    assert headers["Etag"] != json_etag
    status, _, _ = raw("/openapi/v2", Accept=PROTOBUF, **{"If-None-Match": headers["Etag"]})
    assert status == 304


def test_v3_documents_carry_built_in_schemas(
    raw: Callable[..., tuple[int, bytes, dict[str, str]]],
) -> None:
    index = json.loads(raw("/openapi/v3")[1])
    url = index["paths"]["api/v1"]["serverRelativeURL"]
    status, body, headers = raw(url)
    assert status == 200
    schemas = json.loads(body)["components"]["schemas"]
    container = schemas["io.k8s.api.core.v1.Container"]
    assert container["required"] == ["name"]
    assert "resources" in container["properties"]
    assert raw(url, **{"If-None-Match": headers["Etag"]})[0] == 304
    status, body, _ = raw("/openapi/v3/apis/example.com/v1")
    assert status == 404 and json.loads(body)["reason"] == "NotFound"


def _collect_refs(node: object, found: set[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):  # not a property named "$ref"
                found.add(value)
            else:
                _collect_refs(value, found)
    elif isinstance(node, list):
        for item in node:
            _collect_refs(item, found)


def _fields(data: bytes) -> dict[int, list[bytes]]:
    """The length-delimited fields of a protobuf message, by number (other wire types are
    skipped): enough to read names out of the document without a generated class."""
    out: dict[int, list[bytes]] = {}
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = value = 0
        while True:
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while pos < len(data):
        key = varint()
        wire = key & 7
        if wire == 0:
            varint()
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            size = varint()
            out.setdefault(key >> 3, []).append(data[pos : pos + size])
            pos += size
    return out
