"""Users' SSH public keys through the API: added, listed, removed; a key that is not one
valid OpenSSH public key is a 400 naming the field, and nothing is written."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tenants.models import AuditEvent
from tenants.selectors import ssh_keys_for_cluster
from tenants.ssh_keys import SshKey

URL = "/api/v1/users/me/ssh-keys/"


def _keypair(folder: Path, name: str, *options: str) -> str:
    key = folder / name
    subprocess.run(
        ["ssh-keygen", "-q", *options, "-N", "", "-C", f"{name}@laptop", "-f", str(key)],
        check=True,
    )
    return (folder / f"{name}.pub").read_text()


def test_add_list_and_remove_a_key(as_user: Any, bob: Any, alice: Any, tmp_path: Path) -> None:
    public = _keypair(tmp_path, "bob", "-t", "ed25519")
    client = as_user(bob)
    added = client.post(URL, {"public_key": public}, format="json")
    assert added.status_code == 201, added.content
    body = added.json()
    assert body["name"] == "bob@laptop"
    assert body["fingerprint"].startswith("SHA256:")
    assert body["public_key"] == public.strip()
    assert [k["id"] for k in client.get(URL).json()["results"]] == [body["id"]]
    # Another user sees none of it, and cannot remove it.
    assert as_user(alice).get(URL).json()["results"] == []
    assert as_user(alice).delete(f"{URL}{body['id']}/").status_code == 404
    audit = AuditEvent.objects.get(action="ssh_key.add")
    assert audit.actor_name == "bob" and audit.data["fingerprint"] == body["fingerprint"]
    assert client.delete(f"{URL}{body['id']}/").status_code == 204
    assert not SshKey.objects.exists()
    assert AuditEvent.objects.filter(action="ssh_key.remove").count() == 1


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("", "may not be blank"),
        ("not a key at all", "Not an OpenSSH public key of a supported type"),
        ("ssh-ed25519 AAAA!!notbase64", "The key could not be read"),
        ("ssh-dss AAAAB3NzaC1kc3MAAACBAP", "Not an OpenSSH public key of a supported type"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----", "This is a private key"),
        ("ssh-ed25519 AAAA\nssh-ed25519 BBBB", "exactly one public key"),
    ],
)
def test_a_bad_key_is_a_400_naming_the_field(as_user: Any, bob: Any, given: str, says: str) -> None:
    response = as_user(bob).post(URL, {"public_key": given}, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert says in " ".join(error["fields"]["public_key"])
    assert not SshKey.objects.exists()


def test_a_short_rsa_key_and_a_duplicate_are_refused(
    as_user: Any, bob: Any, tmp_path: Path
) -> None:
    weak = _keypair(tmp_path, "weak", "-t", "rsa", "-b", "1024")
    client = as_user(bob)
    refused = client.post(URL, {"public_key": weak}, format="json")
    assert refused.status_code == 400
    assert "at least 2048 bits" in refused.content.decode()
    good = _keypair(tmp_path, "good", "-t", "rsa", "-b", "2048")
    assert client.post(URL, {"public_key": good}, format="json").status_code == 201
    again = client.post(URL, {"public_key": good, "name": "again"}, format="json")
    assert again.status_code == 400
    assert "added this key already" in again.content.decode()
    assert SshKey.objects.count() == 1


def test_a_clusters_keys_are_its_owners_and_the_tenant_admins(
    as_user: Any, acme: Any, alice: Any, bob: Any, vera: Any, tmp_path: Path
) -> None:
    for user in (alice, bob, vera):
        public = _keypair(tmp_path, user.username, "-t", "ed25519")
        assert as_user(user).post(URL, {"public_key": public}, format="json").status_code == 201
    keys = ssh_keys_for_cluster(tenant=acme, owner=bob)
    assert sorted(k.split()[-1] for k in keys) == ["alice@laptop", "bob@laptop"]
