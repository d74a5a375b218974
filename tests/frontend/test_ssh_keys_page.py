"""The account menu's SSH keys page: add a key (a bad one is the form's error, nothing
written), see it listed, remove it."""

from __future__ import annotations

from typing import Any

from django.test import Client

from tenants.ssh_keys import SshKey

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG8eeY1k0q2gqgWQ9U0o2H4QzkP1Vv0y6x7oKJ3s1T0c bob@laptop"


def test_add_list_and_remove_a_key_on_the_page(bob: Any) -> None:
    client = Client()
    client.force_login(bob)
    page = client.get("/account/ssh-keys/")
    assert page.status_code == 200 and b"data-no-keys" in page.content
    bad = client.post("/account/ssh-keys/", {"public_key": "ssh-rsa nonsense", "name": ""})
    assert bad.status_code == 400
    assert b"The key could not be read" in bad.content
    assert not SshKey.objects.exists()
    added = client.post("/account/ssh-keys/", {"public_key": KEY, "name": ""}, follow=True)
    key = SshKey.objects.get(user=bob)
    assert key.name == "bob@laptop"
    assert key.fingerprint.encode() in added.content
    removed = client.post(f"/account/ssh-keys/{key.pk}/remove/", follow=True)
    assert removed.status_code == 200 and b"data-no-keys" in removed.content
    assert not SshKey.objects.exists()
