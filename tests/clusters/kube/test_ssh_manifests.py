"""A cluster asked for with SSH: its head gets the port named ssh and the keys Secret's
read-only mount; the Secret lists the owner's and the tenant admins' keys; a cluster
without SSH gets neither."""

from __future__ import annotations

import base64
from typing import Any

from clusters.kinds.raycluster.engine import cluster_objects
from clusters.kube import ssh
from clusters.kube.manifests import cluster_manifests
from tenants import services
from tests.frontend.conftest import request_cluster

__all__ = ["request_cluster"]


def _head(obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    spec = obj["spec"]["headGroupSpec"]["template"]["spec"]
    return spec["containers"][0], spec


def test_the_head_of_an_ssh_cluster_serves_ssh_with_the_keys_secret(
    request_cluster: Any, bob: Any, alice: Any, vera: Any
) -> None:
    # Three ed25519 public keys of 32 arbitrary bytes each (nobody holds their private half).
    body = "AAAAC3NzaC1lZDI1NTE5AAAAI{}8eeY1k0q2gqgWQ9U0o2H4QzkP1Vv0y6x7oKJ3s1T0c"
    for user, letter in ((bob, "G"), (alice, "A"), (vera, "B")):
        key = f"ssh-ed25519 {body.format(letter)} {user.username}"
        services.ssh_key_add(user=user, public_key=key)
    cluster = request_cluster(bob, name="bob-ssh", ssh=True)
    secret, raycluster = cluster_objects(cluster)
    container, pod = _head(raycluster)
    assert {"name": "ssh", "containerPort": 2222, "protocol": "TCP"} in container["ports"]
    assert {"name": "ssh-authorized-keys", "mountPath": "/etc/gangway/ssh", "readOnly": True} in (
        container["volumeMounts"]
    )
    volume = next(v for v in pod["volumes"] if v["name"] == "ssh-authorized-keys")
    assert volume["secret"]["secretName"] == "bob-ssh-ssh"
    assert (secret["kind"], secret["metadata"]["name"]) == ("Secret", ssh.secret_name("bob-ssh"))
    assert secret["metadata"]["namespace"] == cluster.namespace
    text = base64.b64decode(secret["data"]["authorized_keys"]).decode()
    assert sorted(line.split()[-1] for line in text.splitlines()) == ["alice", "bob"]


def test_a_cluster_without_ssh_has_no_ssh_port_nor_secret(request_cluster: Any, bob: Any) -> None:
    cluster = request_cluster(bob, name="bob-plain")
    objects = cluster_objects(cluster)
    assert [o["kind"] for o in objects] == ["RayCluster"]
    container, pod = _head(cluster_manifests(cluster)[0])
    assert all(p["name"] != "ssh" for p in container["ports"])
    assert all(v["name"] != "ssh-authorized-keys" for v in pod["volumes"])
