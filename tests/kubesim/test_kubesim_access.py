"""Identities and RBAC in kubesim, seen by kubectl (1.37 and 1.32) and the official client:
`auth whoami`, `auth can-i`, `auth can-i --list`, and requests refused with the API
server's 403. kubectl sends no credentials over plain HTTP, so it picks its identity with
`--as`; the Python client sends its kubeconfig context's bearer token."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from kubesim import KubeSim
from kubesim.fleet import DEMO_FLEET

ROOT = Path(__file__).resolve().parents[2]
GANGWAY = "system:serviceaccount:gangway-system:gangway"
ALICE = ("--as", "alice", "--as-group", "team-a")
# The pinned kubectl (the venv's, 1.37) and the system's older one (1.32).
KUBECTLS = [
    k
    for k in (
        shutil.which("kubectl", path=str(Path(sys.executable).parent)),
        "/usr/bin/kubectl",
    )
    if k and os.path.exists(k)
]


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    """The demo fleet with a tenant user, alice (token ``alice-token``, group ``team-a``),
    and a namespace ``team-a`` where the group may manage pods and RayClusters only."""
    with open(DEMO_FLEET, encoding="utf-8") as fh:
        fleet = yaml.safe_load(fh)
    fleet["users"] = [
        {"name": "alice", "token": "alice-token", "username": "alice", "groups": ["team-a"]}
    ]
    s = KubeSim(fleet=fleet).start()
    try:
        yield s
    finally:
        s.stop()


def run(
    kubectl: str, sim: KubeSim, tmp_path: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """kubectl against ``sim`` (its kubeconfig's default context, the admin)."""
    kubeconfig = sim.write_kubeconfig(str(tmp_path / "kubeconfig"))
    env = dict(os.environ, KUBECONFIG=kubeconfig, HOME=str(tmp_path))
    return subprocess.run(
        [kubectl, "--cache-dir", str(tmp_path / "cache"), *args],
        env=env,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
        check=False,
    )


def tenant_namespace(kubectl: str, sim: KubeSim, tmp_path: Path) -> None:
    """As the admin: namespace team-a, a Role on pods and RayClusters, bound to team-a."""
    for args in (
        ("create", "namespace", "team-a"),
        (
            "create",
            "role",
            "dev",
            "-n",
            "team-a",
            "--verb=get,list,watch,create,delete",
            "--resource=pods,rayclusters.ray.io",
        ),
        ("create", "rolebinding", "dev", "-n", "team-a", "--role=dev", "--group=team-a"),
    ):
        proc = run(kubectl, sim, tmp_path, *args)
        assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("kubectl", KUBECTLS)
def test_whoami(kubectl: str, sim: KubeSim, tmp_path: Path) -> None:
    admin = run(kubectl, sim, tmp_path, "auth", "whoami", "-o", "json")
    assert admin.returncode == 0, admin.stderr
    info = yaml.safe_load(admin.stdout)["status"]["userInfo"]
    assert info["username"] == "kubernetes-admin"
    assert "system:masters" in info["groups"]
    gw = run(kubectl, sim, tmp_path, "auth", "whoami", "--as", GANGWAY)
    assert GANGWAY in gw.stdout and "system:serviceaccounts:gangway-system" in gw.stdout
    alice = run(kubectl, sim, tmp_path, "auth", "whoami", *ALICE)
    assert "alice" in alice.stdout and "[team-a system:authenticated]" in alice.stdout


@pytest.mark.parametrize("kubectl", KUBECTLS)
def test_tenant_user_sees_only_its_namespace(kubectl: str, sim: KubeSim, tmp_path: Path) -> None:
    tenant_namespace(kubectl, sim, tmp_path)

    def can_i(*args: str) -> tuple[int, str]:
        proc = run(kubectl, sim, tmp_path, "auth", "can-i", *args, *ALICE)
        return proc.returncode, proc.stdout.strip()

    assert can_i("create", "pods", "-n", "team-a") == (0, "yes")
    assert can_i("list", "rayclusters.ray.io", "-n", "team-a") == (0, "yes")
    assert can_i("patch", "pods", "-n", "team-a") == (1, "no")
    assert can_i("list", "pods", "-n", "default") == (1, "no")
    assert can_i("list", "pods", "--all-namespaces") == (1, "no")
    assert can_i("get", "/version") == (0, "yes")
    assert can_i("get", "/metrics") == (1, "no")
    assert run(kubectl, sim, tmp_path, "get", "pods", "-n", "team-a", *ALICE).returncode == 0
    refused = run(kubectl, sim, tmp_path, "get", "pods", "-n", "default", *ALICE)
    assert refused.returncode == 1
    assert (
        'Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource '
        '"pods" in API group "" in the namespace "default"'
    ) in refused.stderr
    nodes = run(kubectl, sim, tmp_path, "get", "node", "demo-h100-0", *ALICE)
    assert (
        'nodes "demo-h100-0" is forbidden: User "alice" cannot get resource "nodes" in API '
        'group "" at the cluster scope'
    ) in nodes.stderr
    listed = run(kubectl, sim, tmp_path, "auth", "can-i", "--list", "-n", "team-a", *ALICE)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[1:] if line[0] != " "}
    assert "[get list watch create delete]" in rows["pods"]
    assert "[get list watch create delete]" in rows["rayclusters.ray.io"]
    assert "[create]" in rows["selfsubjectaccessreviews.authorization.k8s.io"]
    assert "nodes" not in rows and "secrets" not in rows
    elsewhere = run(kubectl, sim, tmp_path, "auth", "can-i", "--list", "-n", "default", *ALICE)
    assert "pods" not in elsewhere.stdout


def test_gangway_service_account_as_deploy_declares_it(sim: KubeSim, tmp_path: Path) -> None:
    kubectl = KUBECTLS[0]
    gw = ("--as", GANGWAY)
    assert run(kubectl, sim, tmp_path, "auth", "can-i", "create", "rayjobs.ray.io", *gw).stdout == (
        "no\n"
    )
    applied = run(kubectl, sim, tmp_path, "apply", "-f", str(ROOT / "deploy/base/rbac.yaml"))
    assert applied.returncode == 0, applied.stderr

    def can_i(*args: str) -> str:
        return run(kubectl, sim, tmp_path, "auth", "can-i", *args, *gw).stdout.strip()

    assert can_i("patch", "rayjobs.ray.io", "-n", "gw-x") == "yes"
    assert can_i("create", "rayclusters.ray.io", "-n", "gw-y") == "yes"
    assert can_i("get", "pods/log", "-n", "gw-x") == "yes"
    assert can_i("delete", "namespaces") == "no"
    assert can_i("create", "pods", "-n", "gw-x") == "no"
    assert can_i("list", "secrets", "-n", "gw-x") == "no"
    assert can_i("create", "queues.scheduling.run.ai") == "no"
    kubeconfig = sim.write_kubeconfig(str(tmp_path / "gangway.kubeconfig"), context="gangway")
    api = config.new_client_from_config(config_file=kubeconfig)
    try:
        review = client.AuthorizationV1Api(api).create_self_subject_access_review(
            client.V1SelfSubjectAccessReview(
                spec=client.V1SelfSubjectAccessReviewSpec(
                    resource_attributes=client.V1ResourceAttributes(verb="list", resource="pods")
                )
            )
        )
    finally:
        api.close()
    assert review.status.allowed is True
    assert review.status.reason == (
        'RBAC: allowed by ClusterRoleBinding "gangway" of ClusterRole "gangway" to '
        'ServiceAccount "gangway/gangway-system"'
    )


def test_impersonation_needs_the_right_to_impersonate(sim: KubeSim, tmp_path: Path) -> None:
    kubectl = KUBECTLS[0]
    tenant_namespace(kubectl, sim, tmp_path)
    kubeconfig = sim.write_kubeconfig(str(tmp_path / "kubeconfig"), context="alice")
    api = config.new_client_from_config(config_file=kubeconfig)
    try:
        with pytest.raises(ApiException) as refused:
            client.CoreV1Api(api).list_namespaced_pod(
                "team-a", _headers={"Impersonate-User": "bob"}
            )
    finally:
        api.close()
    assert refused.value.status == 403
    assert (
        'users \\"bob\\" is forbidden: User \\"alice\\" cannot impersonate resource \\"users\\"'
        in refused.value.body
    )


def test_official_client_with_a_tenant_token(sim: KubeSim, tmp_path: Path) -> None:
    tenant_namespace(KUBECTLS[0], sim, tmp_path)
    kubeconfig = sim.write_kubeconfig(str(tmp_path / "kubeconfig"), context="alice")
    api = config.new_client_from_config(config_file=kubeconfig)
    try:
        core = client.CoreV1Api(api)
        assert core.list_namespaced_pod("team-a").items == []
        with pytest.raises(ApiException) as refused:
            core.list_namespaced_config_map("team-a")
        assert refused.value.status == 403
        status = yaml.safe_load(refused.value.body)
        assert status["reason"] == "Forbidden"
        assert status["details"] == {"kind": "configmaps"}
        assert status["message"] == (
            'configmaps is forbidden: User "alice" cannot list resource "configmaps" in API '
            'group "" in the namespace "team-a"'
        )
        who = client.AuthenticationV1Api(api).create_self_subject_review(
            client.V1SelfSubjectReview()
        )
        assert who.status.user_info.username == "alice"
        review = client.AuthorizationV1Api(api).create_self_subject_access_review(
            client.V1SelfSubjectAccessReview(
                spec=client.V1SelfSubjectAccessReviewSpec(
                    resource_attributes=client.V1ResourceAttributes(
                        namespace="team-a", verb="delete", group="ray.io", resource="rayclusters"
                    )
                )
            )
        )
        assert review.status.allowed is True
        assert review.status.reason == (
            'RBAC: allowed by RoleBinding "dev/team-a" of Role "dev" to Group "team-a"'
        )
        rules = client.AuthorizationV1Api(api).create_self_subject_rules_review(
            client.V1SelfSubjectRulesReview(
                spec=client.V1SelfSubjectRulesReviewSpec(namespace="team-a")
            )
        )
        assert rules.status.incomplete is False
        assert any("pods" in r.resources for r in rules.status.resource_rules)
    finally:
        api.close()


def test_aggregated_cluster_role_and_bad_reviews(sim: KubeSim, tmp_path: Path) -> None:
    kubectl = KUBECTLS[0]
    for args in (
        ("create", "clusterrole", "agg", "--aggregation-rule=example.com/agg=true"),
        ("create", "clusterrole", "node-reader", "--verb=get,list", "--resource=nodes"),
        ("label", "clusterrole", "node-reader", "example.com/agg=true"),
        ("create", "clusterrolebinding", "agg", "--clusterrole=agg", "--user=alice"),
    ):
        proc = run(kubectl, sim, tmp_path, *args)
        assert proc.returncode == 0, proc.stderr
    assert run(kubectl, sim, tmp_path, "get", "nodes", *ALICE).returncode == 0
    kubeconfig = sim.write_kubeconfig(str(tmp_path / "kubeconfig"), context="alice")
    api = config.new_client_from_config(config_file=kubeconfig)
    try:
        with pytest.raises(ApiException) as invalid:
            client.AuthorizationV1Api(api).create_self_subject_access_review(
                client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec())
            )
        assert invalid.value.status == 422
        assert "exactly one of nonResourceAttributes or resourceAttributes" in invalid.value.body
        # Reading the reviews is a list the tenant may not do; the admin may, but they are
        # create-only: 405.
        path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        with pytest.raises(ApiException) as refused:
            api.call_api(path, "GET", auth_settings=["BearerToken"], _preload_content=False)
        assert refused.value.status == 403
    finally:
        api.close()
    admin = config.new_client_from_config(config_file=sim.write_kubeconfig(kubeconfig))
    try:
        with pytest.raises(ApiException) as not_allowed:
            admin.call_api(path, "GET", auth_settings=["BearerToken"], _preload_content=False)
        assert not_allowed.value.status == 405
    finally:
        admin.close()


def test_a_token_nobody_has_is_401_before_any_authorizer(sim: KubeSim) -> None:
    api = client.ApiClient(client.Configuration(host=sim.url))
    api.configuration.api_key = {"authorization": "Bearer not-a-token"}
    try:
        with pytest.raises(ApiException) as refused:
            client.VersionApi(api).get_code()
        assert refused.value.status == 401
        status = yaml.safe_load(refused.value.body)
        assert (status["reason"], status["message"]) == ("Unauthorized", "Unauthorized")
        api.configuration.api_key = {"authorization": "Bearer alice-token"}
        assert client.VersionApi(api).get_code().git_version.startswith("v1.")
    finally:
        api.close()


def test_an_operator_nobody_installed_is_not_served() -> None:
    with open(DEMO_FLEET, encoding="utf-8") as fh:
        fleet = yaml.safe_load(fh)
    fleet["absentGroups"] = ["kueue.x-k8s.io"]
    s = KubeSim(fleet=fleet).start()
    api = config.new_client_from_config_dict(s.kubeconfig("kubesim"))
    try:
        groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
        assert "ray.io" in groups and "kueue.x-k8s.io" not in groups
        crds = client.ApiextensionsV1Api(api).list_custom_resource_definition().items
        assert "rayjobs.ray.io" in {c.metadata.name for c in crds}
        assert not [c for c in crds if c.spec.group == "kueue.x-k8s.io"]
        with pytest.raises(ApiException) as missing:
            client.CustomObjectsApi(api).list_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "clusterqueues"
            )
        assert missing.value.status == 404
    finally:
        api.close()
        s.stop()
