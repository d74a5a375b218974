"""tenants.services.ssh_keys: a user adds one valid OpenSSH public key at a time (named
after its comment unless named), never the same one twice nor past the limit, removes
only their own; both are audited, and a refusal writes nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.http import Http404

from tenants.models import AuditEvent
from tenants.services.ssh_keys import MAX_KEYS_PER_USER, ssh_key_add, ssh_key_remove
from tenants.ssh_keys import SshKey

pytestmark = pytest.mark.django_db


def _public(folder: Path, name: str) -> str:
    key = folder / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name}@laptop", "-f", str(key)],
        check=True,
    )
    return (folder / f"{name}.pub").read_text()


def test_a_key_is_added_named_after_its_comment_and_audited(bob: Any, tmp_path: Path) -> None:
    public = _public(tmp_path, "bob")
    key = ssh_key_add(user=bob, public_key=f"  {public}\n")
    assert (key.user, key.name, key.public_key) == (bob, "bob@laptop", public.strip())
    assert key.fingerprint.startswith("SHA256:")
    audit = AuditEvent.objects.get(action="ssh_key.add")
    assert audit.actor == bob
    assert audit.data == {"fingerprint": key.fingerprint, "name": "bob@laptop"}
    named = ssh_key_add(user=bob, public_key=_public(tmp_path, "other"), name="n" * 150)
    assert named.name == "n" * 100  # a given name wins, cut to the column


def test_a_bad_key_is_refused_on_its_field_and_nothing_is_written(bob: Any) -> None:
    for bad in ("", "not a key", "-----BEGIN OPENSSH PRIVATE KEY-----"):
        with pytest.raises(ValidationError) as refused:
            ssh_key_add(user=bob, public_key=bad)
        assert list(refused.value.message_dict) == ["public_key"]
    assert not SshKey.objects.exists() and not AuditEvent.objects.exists()


def test_the_same_key_twice_is_refused_but_another_user_may_add_it(
    alice: Any, bob: Any, tmp_path: Path
) -> None:
    public = _public(tmp_path, "shared")
    key = ssh_key_add(user=bob, public_key=public)
    with pytest.raises(ValidationError) as refused:
        ssh_key_add(user=bob, public_key=public, name="again")
    assert refused.value.message_dict["public_key"] == [
        f"You have added this key already ({key.fingerprint})."
    ]
    assert ssh_key_add(user=alice, public_key=public).fingerprint == key.fingerprint
    assert SshKey.objects.filter(user=bob).count() == 1


def test_a_user_holds_at_most_the_limit_of_keys(alice: Any, bob: Any, tmp_path: Path) -> None:
    ssh_key_add(user=alice, public_key=_public(tmp_path, "alice"))  # not bob's to count
    for n in range(MAX_KEYS_PER_USER):
        ssh_key_add(user=bob, public_key=_public(tmp_path, f"k{n}"))
    with pytest.raises(ValidationError) as refused:
        ssh_key_add(user=bob, public_key=_public(tmp_path, "one-more"))
    assert refused.value.message_dict["public_key"] == [
        f"At most {MAX_KEYS_PER_USER} keys per user."
    ]
    assert SshKey.objects.filter(user=bob).count() == MAX_KEYS_PER_USER


def test_a_user_removes_their_own_key_only(alice: Any, bob: Any, tmp_path: Path) -> None:
    mine = ssh_key_add(user=bob, public_key=_public(tmp_path, "bob"))
    hers = ssh_key_add(user=alice, public_key=_public(tmp_path, "alice"))
    with pytest.raises(Http404):
        ssh_key_remove(user=bob, key_id=hers.pk)
    with pytest.raises(Http404):
        ssh_key_remove(user=bob, key_id=hers.pk + mine.pk + 1000)
    assert not AuditEvent.objects.filter(action="ssh_key.remove").exists()
    ssh_key_remove(user=bob, key_id=mine.pk)
    assert list(SshKey.objects.values_list("pk", flat=True)) == [hers.pk]
    audit = AuditEvent.objects.get(action="ssh_key.remove")
    assert audit.actor == bob
    assert audit.data == {"fingerprint": mine.fingerprint, "name": "bob@laptop"}
