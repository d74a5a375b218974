"""Kubernetes protobuf request bodies: kubectl's imperative creates, the decoder on bodies
captured from kubectl (fixtures/protobuf, see capture.py there), and the refusals."""

from __future__ import annotations

import base64
import http.client
import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest
from kubernetes import client

from kubesim import KubeSim, protobuf

Kubectl = Callable[..., CompletedProcess[str]]
FIXTURES = Path(__file__).parent / "fixtures" / "protobuf"
PB = protobuf.MEDIA_TYPE


# -- a few lines of encoder, to build bodies by hand --------------------------------------------


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative numbers go as their 64-bit two's complement
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def num(field: int, value: int) -> bytes:
    """A varint field."""
    return _varint(field << 3) + _varint(value)


def ld(field: int, *parts: bytes | str) -> bytes:
    """A length-delimited field holding the concatenation of ``parts``."""
    data = b"".join(p.encode() if isinstance(p, str) else p for p in parts)
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def envelope(api_version: str, kind: str, raw: bytes, *extra: bytes) -> bytes:
    """``k8s\\0`` + runtime.Unknown{typeMeta, raw, ...}."""
    return b"k8s\x00" + ld(1, ld(1, api_version), ld(2, kind)) + ld(2, raw) + b"".join(extra)


def meta(name: str, *extra: bytes) -> bytes:
    """An ObjectMeta field (number 1 in every kind) with a name."""
    return ld(1, ld(1, name), *extra)


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


# -- the decoder ------------------------------------------------------------------------------


SERVED_FIXTURES = sorted(p.stem for p in FIXTURES.glob("*.pb"))


@pytest.mark.parametrize("name", SERVED_FIXTURES)
def test_decode_gives_the_json_kubectl_prints_for_the_same_object(name: str) -> None:
    body = (FIXTURES / f"{name}.pb").read_bytes()
    assert body.startswith(b"k8s\x00")
    expected = json.loads((FIXTURES / f"{name}.json").read_text())
    assert protobuf.decode(body) == expected


def _field(buf: bytes, number: int) -> bytes:
    value = next(v for n, _, v in protobuf.fields(buf) if n == number)
    assert isinstance(value, bytes)
    return value


def test_pod_spec_tables_read_the_pod_template_kubectl_sends_in_a_job() -> None:
    # kubectl's Job body carries a real PodSpec with every zero field Go writes:
    # envelope raw=2 -> JobSpec spec=2 -> PodTemplateSpec template=6 -> spec=2.
    body = (FIXTURES / "job.pb").read_bytes()
    assert protobuf.decode(body)["kind"] == "Job"  # served since batch/v1 Jobs are
    pod_spec = _field(_field(_field(_field(body[4:], 2), 2), 6), 2)
    expected = json.loads((FIXTURES / "job.json").read_text())["spec"]["template"]["spec"]
    assert protobuf.decode_message(pod_spec, "PodSpec") == expected


def test_fixtures_cover_maps_bytes_lists_and_nested_messages() -> None:
    configmap = protobuf.decode((FIXTURES / "configmap.pb").read_bytes())
    assert base64.b64decode(configmap["binaryData"]["blob"]) == bytes(range(256))
    assert (
        "kubectl.kubernetes.io/last-applied-configuration" in configmap["metadata"]["annotations"]
    )
    quota = protobuf.decode((FIXTURES / "quota.pb").read_bytes())
    assert quota["spec"]["hard"] == {"cpu": "4", "requests.nvidia.com/gpu": "2"}
    service = protobuf.decode((FIXTURES / "service-nodeport.pb").read_bytes())
    assert service["spec"]["ports"] == [
        {"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080, "nodePort": 30080}
    ]


def test_zero_values_are_dropped_unless_the_go_field_is_a_pointer() -> None:
    # generation=0 and an empty uid are what Go writes for unset non-pointer fields;
    # automountServiceAccountToken is a *bool: false was set on purpose and must stay.
    body = envelope("v1", "ServiceAccount", meta("robot", ld(5, ""), num(7, 0)) + num(4, 0))
    assert protobuf.decode(body) == {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "robot"},
        "automountServiceAccountToken": False,
    }


def test_times_int_or_string_negative_packed_and_inlined_fields() -> None:
    container = ld(1, "main") + ld(2, "busybox")
    security = ld(4, b"\xe8\x07\xd0\x0f")  # supplementalGroups=[1000, 2000], packed
    volume = ld(1, ld(1, "scratch"), ld(2, ld(2, "")))  # Volume{name, VolumeSource{emptyDir}}
    spec = ld(2, ld(2, container), volume, ld(14, security), num(25, -5))
    pod = envelope("v1", "Pod", meta("p", ld(8, num(1, 1_700_000_000))) + spec)
    decoded = protobuf.decode(pod)
    assert decoded["metadata"]["creationTimestamp"] == "2023-11-14T22:13:20Z"
    assert decoded["spec"]["containers"] == [{"name": "main", "image": "busybox"}]
    assert decoded["spec"]["volumes"] == [{"name": "scratch", "emptyDir": {}}]
    assert decoded["spec"]["securityContext"] == {"supplementalGroups": [1000, 2000]}
    assert decoded["spec"]["priority"] == -5
    port = ld(1, ld(1, "web"), num(3, 80), ld(4, num(1, 1), ld(3, "http")))
    service = protobuf.decode(envelope("v1", "Service", meta("s") + ld(2, port)))
    assert service["spec"]["ports"] == [{"name": "web", "port": 80, "targetPort": "http"}]
    event_time = ld(10, num(1, 1_700_000_000), num(2, 123_456_789))
    event = protobuf.decode(envelope("v1", "Event", meta("e") + event_time + num(8, 3)))
    assert event["eventTime"] == "2023-11-14T22:13:20.123456Z"
    assert event["count"] == 3


def test_an_empty_field_unknown_to_kubesim_is_skipped() -> None:
    # Go writes every non-pointer field, so a field newer than the tables arrives empty.
    body = envelope("v1", "ConfigMap", meta("c") + ld(99, "") + num(98, 0))
    assert protobuf.decode(body)["metadata"] == {"name": "c"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"kind": "ConfigMap"}', "does not start with the Kubernetes protobuf prefix"),
        (b"k8s\x00\x0a", "ends inside a varint"),
        (b"k8s\x00\x12\x05ab", "runs past the end of its message"),
        (b"k8s\x00\x0b", "wire type 3"),
        (b"k8s\x00\x12\x00", "no typeMeta.kind"),
        (envelope("v1", "ConfigMap", num(1, 7)), "metadata: wire type 0"),
        (envelope("v1", "ConfigMap", meta("c") + ld(7, "surprise")), "field 7 of ConfigMap"),
        (envelope("v1", "ConfigMap", meta("c", ld(11, ld(1, b"\xff")))), "not valid UTF-8"),
        (envelope("v1", "ConfigMap", b"\x08" + b"\xff" * 10 + b"\x01"), "longer than 10 bytes"),
    ],
    ids=[
        "json",
        "truncated",
        "overrun",
        "group",
        "no-kind",
        "wire-type",
        "unknown",
        "utf8",
        "varint",
    ],
)
def test_malformed_bodies_raise_decode_error(body: bytes, message: str) -> None:
    with pytest.raises(protobuf.DecodeError, match=message):
        protobuf.decode(body)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (envelope("apps/v1", "Deployment", meta("d")), '"apps/v1, Kind=Deployment"'),
        (envelope("ray.io/v1", "RayCluster", meta("r")), '"ray.io/v1, Kind=RayCluster"'),
        (envelope("v1", "ConfigMap", meta("c"), ld(3, "gzip")), 'contentEncoding "gzip"'),
    ],
    ids=["deployment", "custom-kind", "gzip"],
)
def test_kinds_and_encodings_kubesim_cannot_read_are_unsupported(body: bytes, message: str) -> None:
    with pytest.raises(protobuf.Unsupported, match=message):
        protobuf.decode(body)


# -- over HTTP --------------------------------------------------------------------------------


def request(
    sim: KubeSim, method: str, path: str, body: bytes = b"", ctype: str = PB
) -> tuple[int, dict[str, Any]]:
    """One request; the status code and the JSON answer."""
    conn = http.client.HTTPConnection(sim.host, sim.port, timeout=10)
    try:
        headers = {"Content-Type": ctype, "Accept": f"{PB},application/json"}
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        assert resp.getheader("Content-Type") == "application/json"
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def test_bad_protobuf_is_400_and_unknown_kind_415_with_status_bodies(sim: KubeSim) -> None:
    code, status = request(sim, "POST", CONFIGMAPS, b"k8s\x00\x12\x05ab")
    assert code == 400
    assert status["kind"] == "Status" and status["reason"] == "BadRequest"
    assert status["message"].startswith("the body of the request could not be decoded as protobuf")
    code, status = request(sim, "POST", CONFIGMAPS, envelope("apps/v1", "Deployment", meta("d")))
    assert code == 415 and status["reason"] == "UnsupportedMediaType"
    assert "apps/v1, Kind=Deployment" in status["message"]
    assert sim.list("configmaps", "default") == []


def test_a_body_of_another_kind_is_refused(sim: KubeSim) -> None:
    secret = envelope("v1", "Secret", meta("s") + ld(2, ld(1, "k"), ld(2, "v")))
    code, status = request(sim, "POST", CONFIGMAPS, secret)
    assert code == 400
    assert status["message"] == (
        "the object provided is unrecognized (must be of type ConfigMap): the body is a Secret"
    )
    as_json = json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}})
    code, _ = request(sim, "POST", CONFIGMAPS, as_json.encode(), "application/json")
    assert code == 400
    assert sim.list("configmaps", "default") == []


def test_unknown_media_types_are_415_not_a_yaml_error(sim: KubeSim) -> None:
    code, status = request(sim, "POST", CONFIGMAPS, b"\x00\x01\x02", "application/octet-stream")
    assert code == 415 and status["reason"] == "UnsupportedMediaType"
    assert '(got "application/octet-stream")' in status["message"]
    code, status = request(sim, "POST", CONFIGMAPS, b"{not json", "application/json")
    assert code == 400
    assert status["message"].startswith("the body of the request could not be decoded as JSON")
    assert sim.list("configmaps", "default") == []


def test_put_in_protobuf_replaces_and_patch_in_protobuf_is_415(sim: KubeSim) -> None:
    code, created = request(sim, "POST", CONFIGMAPS, envelope("v1", "ConfigMap", meta("c")))
    assert code == 201
    rv = created["metadata"]["resourceVersion"]
    replacement = envelope("v1", "ConfigMap", meta("c", ld(6, rv)) + ld(2, ld(1, "k"), ld(2, "v")))
    code, replaced = request(sim, "PUT", f"{CONFIGMAPS}/c", replacement)
    assert code == 200 and replaced["data"] == {"k": "v"}
    code, status = request(sim, "PUT", f"{CONFIGMAPS}/c", replacement)  # rv is stale now
    assert code == 409 and status["reason"] == "Conflict"
    code, status = request(sim, "PATCH", f"{CONFIGMAPS}/c", replacement)
    assert code == 415 and "application/merge-patch+json" in status["message"]
    assert sim.get("configmaps", "default", "c")["data"] == {"k": "v"}


def test_delete_options_in_protobuf(sim: KubeSim) -> None:
    request(sim, "POST", CONFIGMAPS, envelope("v1", "ConfigMap", meta("c")))
    wrong_uid = envelope("v1", "DeleteOptions", ld(2, ld(1, "not-the-uid")))
    code, status = request(sim, "DELETE", f"{CONFIGMAPS}/c", wrong_uid)
    assert code == 409 and status["reason"] == "Conflict"
    uid = sim.get("configmaps", "default", "c")["metadata"]["uid"]
    right_uid = envelope("v1", "DeleteOptions", ld(2, ld(1, uid)) + ld(4, "Foreground"))
    code, status = request(sim, "DELETE", f"{CONFIGMAPS}/c", right_uid)
    assert code == 200 and status["status"] == "Success"
    assert sim.get("configmaps", "default", "c") is None


def test_a_body_left_unread_does_not_spill_into_the_next_request(sim: KubeSim) -> None:
    conn = http.client.HTTPConnection(sim.host, sim.port, timeout=10)
    try:
        body = envelope("v1", "ConfigMap", meta("c"))
        conn.request("POST", "/api/v1/namespaces/default/nothings", body, {"Content-Type": PB})
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 404
        conn.request("GET", "/version")  # the same keep-alive connection
        resp = conn.getresponse()
        assert resp.status == 200 and json.loads(resp.read())["major"] == "1"
    finally:
        conn.close()


# -- kubectl's imperative creates ---------------------------------------------------------------


def _secret_data(core: client.CoreV1Api, name: str) -> dict[str, bytes]:
    secret = core.read_namespaced_secret(name, "team")
    return {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}


def _check_namespace(api: client.ApiClient, tmp: Path) -> None:
    assert client.CoreV1Api(api).read_namespace("lab").status.phase == "Active"


def _check_configmap(api: client.ApiClient, tmp: Path) -> None:
    cm = client.CoreV1Api(api).read_namespaced_config_map("cfg", "team")
    assert cm.data == {"a": "1", "b": "two=2"}
    assert base64.b64decode(cm.binary_data["blob"]) == bytes(range(256))
    applied = json.loads(
        cm.metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]
    )
    assert applied["data"] == {"a": "1", "b": "two=2"}


def _check_secret_generic(api: client.ApiClient, tmp: Path) -> None:
    core = client.CoreV1Api(api)
    assert _secret_data(core, "creds") == {"user": b"admin", "password": b"s3cr=t"}
    assert core.read_namespaced_secret("creds", "team").type == "Opaque"


def _check_secret_tls(api: client.ApiClient, tmp: Path) -> None:
    core = client.CoreV1Api(api)
    assert core.read_namespaced_secret("cert", "team").type == "kubernetes.io/tls"
    data = _secret_data(core, "cert")
    assert data == {
        "tls.crt": (tmp / "tls.crt").read_bytes(),
        "tls.key": (tmp / "tls.key").read_bytes(),
    }


def _check_secret_docker(api: client.ApiClient, tmp: Path) -> None:
    core = client.CoreV1Api(api)
    assert core.read_namespaced_secret("pull", "team").type == "kubernetes.io/dockerconfigjson"
    auths = json.loads(_secret_data(core, "pull")[".dockerconfigjson"])["auths"]
    assert auths["registry.example.com"]["username"] == "robot"
    assert auths["registry.example.com"]["password"] == "hunter2"


def _check_serviceaccount(api: client.ApiClient, tmp: Path) -> None:
    sa = client.CoreV1Api(api).read_namespaced_service_account("robot", "team")
    assert sa.metadata.namespace == "team" and sa.metadata.uid


def _check_quota(api: client.ApiClient, tmp: Path) -> None:
    quota = client.CoreV1Api(api).read_namespaced_resource_quota("gpu", "team")
    hard = {"cpu": "4", "memory": "8Gi", "requests.nvidia.com/gpu": "2", "pods": "10"}
    assert quota.spec.hard == hard
    assert quota.status.hard == hard


def _check_quota_scoped(api: client.ApiClient, tmp: Path) -> None:
    quota = client.CoreV1Api(api).read_namespaced_resource_quota("besteffort", "team")
    assert quota.spec.hard == {"pods": "3"} and quota.spec.scopes == ["BestEffort"]


def _check_role(api: client.ApiClient, tmp: Path) -> None:
    rules = client.RbacAuthorizationV1Api(api).read_namespaced_role("reader", "team").rules
    assert [(r.api_groups, r.resources, r.verbs) for r in rules] == [
        ([""], ["pods"], ["get", "list"]),
        (["ray.io"], ["rayclusters"], ["get", "list"]),
    ]


def _check_rolebinding(api: client.ApiClient, tmp: Path) -> None:
    rb = client.RbacAuthorizationV1Api(api).read_namespaced_role_binding("rb", "team")
    assert (rb.role_ref.kind, rb.role_ref.name) == ("Role", "reader")
    assert sorted((s.kind, s.name, s.namespace) for s in rb.subjects) == [
        ("Group", "devs", None),
        ("ServiceAccount", "robot", "team"),
        ("User", "alice", None),
    ]


def _check_clusterrole(api: client.ApiClient, tmp: Path) -> None:
    role = client.RbacAuthorizationV1Api(api).read_cluster_role("node-reader")
    assert [(r.resources, r.verbs) for r in role.rules] == [(["nodes"], ["get", "list"])]


def _check_clusterrole_aggregated(api: client.ApiClient, tmp: Path) -> None:
    role = client.RbacAuthorizationV1Api(api).read_cluster_role("agg")
    selectors = role.aggregation_rule.cluster_role_selectors
    assert [s.match_labels for s in selectors] == [{"rbac.example.com/aggregate": "true"}]


def _check_clusterrolebinding(api: client.ApiClient, tmp: Path) -> None:
    crb = client.RbacAuthorizationV1Api(api).read_cluster_role_binding("crb")
    assert (crb.role_ref.kind, crb.role_ref.name) == ("ClusterRole", "node-reader")
    assert [(s.kind, s.name) for s in crb.subjects] == [("Group", "devs")]


def _service(api: client.ApiClient, name: str) -> Any:
    return client.CoreV1Api(api).read_namespaced_service(name, "team")


def _check_service_clusterip(api: client.ApiClient, tmp: Path) -> None:
    svc = _service(api, "api")
    assert svc.spec.type == "ClusterIP" and svc.spec.selector == {"app": "api"}
    assert [(p.port, p.target_port) for p in svc.spec.ports] == [(80, 8080), (443, 8443)]
    assert svc.spec.cluster_ip


def _check_service_headless(api: client.ApiClient, tmp: Path) -> None:
    assert _service(api, "headless").spec.cluster_ip == "None"


def _check_service_nodeport(api: client.ApiClient, tmp: Path) -> None:
    svc = _service(api, "web")
    assert svc.spec.type == "NodePort" and svc.spec.ports[0].node_port == 30080


def _check_service_loadbalancer(api: client.ApiClient, tmp: Path) -> None:
    svc = _service(api, "lb")
    assert svc.spec.type == "LoadBalancer" and svc.spec.ports[0].target_port == 8080


def _check_service_externalname(api: client.ApiClient, tmp: Path) -> None:
    svc = _service(api, "ext")
    assert (svc.spec.type, svc.spec.external_name) == ("ExternalName", "example.com")


@dataclass(frozen=True)
class Create:
    """One imperative ``kubectl create``; ``get`` names the object for ``kubectl get``."""

    args: str
    get: str
    check: Callable[[client.ApiClient, Path], None]


CREATES = {
    "namespace": Create("namespace lab", "namespace lab", _check_namespace),
    "configmap": Create(
        "configmap cfg -n team --from-literal=a=1 --from-literal=b=two=2 "
        "--from-file=blob={tmp}/blob --save-config",
        "configmap cfg -n team",
        _check_configmap,
    ),
    "secret-generic": Create(
        "secret generic creds -n team --from-literal=user=admin --from-literal=password=s3cr=t "
        "--type=Opaque",
        "secret creds -n team",
        _check_secret_generic,
    ),
    "secret-tls": Create(
        "secret tls cert -n team --cert={tmp}/tls.crt --key={tmp}/tls.key",
        "secret cert -n team",
        _check_secret_tls,
    ),
    "secret-docker-registry": Create(
        "secret docker-registry pull -n team --docker-server=registry.example.com "
        "--docker-username=robot --docker-password=hunter2",
        "secret pull -n team",
        _check_secret_docker,
    ),
    "serviceaccount": Create(
        "serviceaccount robot -n team", "serviceaccount robot -n team", _check_serviceaccount
    ),
    "quota": Create(
        "quota gpu -n team --hard=cpu=4,memory=8Gi,requests.nvidia.com/gpu=2,pods=10",
        "resourcequota gpu -n team",
        _check_quota,
    ),
    "quota-scoped": Create(
        "quota besteffort -n team --hard=pods=3 --scopes=BestEffort",
        "resourcequota besteffort -n team",
        _check_quota_scoped,
    ),
    "role": Create(
        "role reader -n team --verb=get,list --resource=pods,rayclusters.ray.io",
        "role reader -n team",
        _check_role,
    ),
    "rolebinding": Create(
        "rolebinding rb -n team --role=reader --user=alice --group=devs "
        "--serviceaccount=team:robot",
        "rolebinding rb -n team",
        _check_rolebinding,
    ),
    "clusterrole": Create(
        "clusterrole node-reader --verb=get,list --resource=nodes",
        "clusterrole node-reader",
        _check_clusterrole,
    ),
    "clusterrole-aggregated": Create(
        "clusterrole agg --aggregation-rule=rbac.example.com/aggregate=true",
        "clusterrole agg",
        _check_clusterrole_aggregated,
    ),
    "clusterrolebinding": Create(
        "clusterrolebinding crb --clusterrole=node-reader --group=devs",
        "clusterrolebinding crb",
        _check_clusterrolebinding,
    ),
    "service-clusterip": Create(
        "service clusterip api -n team --tcp=80:8080 --tcp=443:8443",
        "service api -n team",
        _check_service_clusterip,
    ),
    "service-headless": Create(
        "service clusterip headless -n team --clusterip=None",
        "service headless -n team",
        _check_service_headless,
    ),
    "service-nodeport": Create(
        "service nodeport web -n team --tcp=80:8080 --node-port=30080",
        "service web -n team",
        _check_service_nodeport,
    ),
    "service-loadbalancer": Create(
        "service loadbalancer lb -n team --tcp=80:8080",
        "service lb -n team",
        _check_service_loadbalancer,
    ),
    "service-externalname": Create(
        "service externalname ext -n team --external-name=example.com",
        "service ext -n team",
        _check_service_externalname,
    ),
}


def _protobuf_bodies(sim: KubeSim) -> int:
    return int(sim.faults.stats()["bodies"].get(PB, 0))


def _assert_contains(stored: Any, expected: Any, path: str = "") -> None:
    """Every field of ``expected`` is in ``stored`` with the same value."""
    if isinstance(expected, dict):
        assert isinstance(stored, dict), path
        for key, value in expected.items():
            assert key in stored, f"{path}.{key} is missing"
            _assert_contains(stored[key], value, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(stored, list) and len(stored) == len(expected), path
        for i, (s, e) in enumerate(zip(stored, expected, strict=True)):
            _assert_contains(s, e, f"{path}[{i}]")
    else:
        assert stored == expected, f"{path}: {stored!r} != {expected!r}"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """A binary file and a TLS certificate with its key, for --from-file and secret tls."""
    (tmp_path / "blob").write_bytes(bytes(range(256)))
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is needed to make a certificate for kubectl create secret tls")
    key, cert = tmp_path / "tls.key", tmp_path / "tls.crt"
    command = f"req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=t -keyout {key} -out {cert}"
    subprocess.run([openssl, *command.split()], check=True, capture_output=True)
    return tmp_path


@pytest.mark.parametrize("case", CREATES.values(), ids=CREATES.keys())
def test_kubectl_create_sends_protobuf_and_the_object_is_stored_whole(
    case: Create, kubectl: Kubectl, sim: KubeSim, kube_api: client.ApiClient, files: Path
) -> None:
    assert "namespace/team created" in kubectl("create", "namespace", "team").stdout
    args = case.args.format(tmp=files).split()
    printed = kubectl("create", *args, "--dry-run=client", "-o", "json").stdout
    expected = _drop_nulls(json.loads(printed))
    before = _protobuf_bodies(sim)
    assert " created" in kubectl("create", *args).stdout
    assert _protobuf_bodies(sim) == before + 1  # kubectl did send protobuf
    stored = json.loads(kubectl("get", *case.get.split(), "-o", "json").stdout)
    _assert_contains(stored, expected)
    case.check(kube_api, files)


def test_kubectl_create_errors_come_back_readable(kubectl: Kubectl, sim: KubeSim) -> None:
    kubectl("create", "namespace", "team")
    again = kubectl("create", "namespace", "team", check=False)
    assert again.returncode != 0
    assert 'namespaces "team" already exists' in again.stderr
    dry = kubectl(
        "create", "configmap", "cfg", "-n", "team", "--from-literal=a=1", "--dry-run=server"
    )
    assert "configmap/cfg created (server dry run)" in dry.stdout
    assert sim.get("configmaps", "team", "cfg") is None
    missing = kubectl("create", "serviceaccount", "sa", "-n", "nowhere", check=False)
    assert missing.returncode != 0
    assert 'namespaces "nowhere" not found' in missing.stderr
