"""A kubesim over HTTP that knows three identities, as a real cluster would hold them:
``member-token`` (a service account bound to the ClusterRole ``manage.py kubecluster
rbac`` prints), ``narrow-token`` (the same role without deleting Ray objects) and
``bare-token`` (authenticated, no role: what a fresh service account has)."""

from __future__ import annotations

import copy
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from clusters.members import access
from kubesim import KubeSim
from kubesim.fleet import DEMO_FLEET

MEMBER_SA = "system:serviceaccount:gangway-system:gangway-member"
USERS = [
    {
        "name": "member",
        "token": "member-token",
        "username": MEMBER_SA,
        "groups": ["system:serviceaccounts", "system:serviceaccounts:gangway-system"],
    },
    {"name": "narrow", "token": "narrow-token", "username": "narrow"},
    {"name": "bare", "token": "bare-token", "username": "bare"},
]


def post(sim: KubeSim, path: str, body: dict[str, Any]) -> None:
    """Create an object as kubesim's admin."""
    request = urllib.request.Request(
        sim.url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer kubesim"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 201


def grant(sim: KubeSim, role: dict[str, Any], subject: dict[str, Any]) -> None:
    """Create ``role`` (a ClusterRole) and bind it to ``subject`` cluster-wide."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    post(sim, f"{rbac}/clusterroles", role)
    name = role["metadata"]["name"]
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [subject],
    }
    post(sim, f"{rbac}/clusterrolebindings", binding)


def start_member_sim(*, absent_groups: tuple[str, ...] = (), **options: Any) -> KubeSim:
    """A demo-fleet kubesim with the three identities and their roles (and without the
    operators of ``absent_groups``)."""
    with open(DEMO_FLEET, encoding="utf-8") as fh:
        fleet = yaml.safe_load(fh)
    fleet["users"] = USERS
    fleet["absentGroups"] = list(absent_groups)
    sim = KubeSim(fleet=fleet, port=0, startup_delay=0.0, **options).start()
    role = yaml.safe_load(access.cluster_role(queue_mode="builtin", kai_enabled=False))
    sa = {"kind": "ServiceAccount", "name": "gangway-member", "namespace": "gangway-system"}
    grant(sim, role, sa)
    narrow = copy.deepcopy(role)
    narrow["metadata"]["name"] = "narrow"
    for rule in narrow["rules"]:
        if rule["apiGroups"] == ["ray.io"]:
            rule["verbs"].remove("delete")
    grant(sim, narrow, {"kind": "User", "name": "narrow", "apiGroup": "rbac.authorization.k8s.io"})
    return sim


@pytest.fixture
def member_sim() -> Iterator[KubeSim]:
    """A running kubesim to register (its URL is ``member_sim.url``)."""
    sim = start_member_sim()
    try:
        yield sim
    finally:
        sim.stop()
