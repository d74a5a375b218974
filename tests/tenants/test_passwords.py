"""Passwords through the API and the dashboard's forms: change your own, an admin's
temporary password (changed at the next sign-in) or reset link, reset by email, and
accounts that sign in through the identity provider. Every change is audited without
the password; the OpenAPI schema lists the endpoints."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core import mail
from django.test import Client
from knox.models import AuthToken
from rest_framework.test import APIClient

from tenants.models import AuditEvent, PasswordState

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery"  # tests.factories.UserFactory's
NEW = "a-long-unusual-passphrase-42"
MINE = "my-own-fresh-phrase-31"
ME = "/api/v1/users/me/password/"


def _token_client(user: Any) -> tuple[APIClient, str]:
    _, key = AuthToken.objects.create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client, key


def _signed_in(username: str, password: str = PASSWORD) -> Client:
    client = Client()
    response = client.post("/login/", {"username": username, "password": password})
    assert response.status_code == 302, response.content
    return client


def _no_password_in_audit() -> None:
    for event in AuditEvent.objects.all():
        text = json.dumps(event.data)
        assert NEW not in text and PASSWORD not in text, event.action


def test_changing_your_password_keeps_tokens_and_ends_other_sessions(bob: Any) -> None:
    api, _ = _token_client(bob)
    other_session = _signed_in("bob")
    response = api.post(ME, {"old_password": PASSWORD, "new_password": NEW}, format="json")
    assert response.status_code == 204, response.content
    bob.refresh_from_db()
    assert bob.check_password(NEW)
    assert api.get("/api/v1/users/me/").status_code == 200  # the token still works
    assert other_session.get("/").status_code == 302  # the other session ended
    (event,) = AuditEvent.objects.filter(action="user.password_change")
    assert event.actor == bob and event.object_id == str(bob.pk)
    _no_password_in_audit()


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"old_password": "not-it", "new_password": NEW}, "old_password", "not right"),
        ({"old_password": PASSWORD, "new_password": "short"}, "new_password", "too short"),
        ({"old_password": PASSWORD, "new_password": "12345678901"}, "new_password", "numeric"),
        ({"old_password": PASSWORD, "new_password": "password123"}, "new_password", "common"),
    ],
)
def test_a_refused_change_is_a_400_naming_the_field(
    as_user: Any, bob: Any, body: dict[str, str], field: str, message: str
) -> None:
    response = as_user(bob).post(ME, body, format="json")
    assert response.status_code == 400
    errors = response.json()["error"]["fields"][field]
    assert any(message in error for error in errors), errors
    bob.refresh_from_db()
    assert bob.check_password(PASSWORD)
    assert not AuditEvent.objects.filter(action__startswith="user.password").exists()


def test_an_sso_account_is_told_to_use_its_identity_provider(
    as_user: Any, bob: Any, root: Any, settings: Any
) -> None:
    settings.OIDC_PROVIDER_NAME = "Acme Login"
    bob.set_unusable_password()
    bob.save()
    response = as_user(bob).post(ME, {"old_password": "x", "new_password": NEW}, format="json")
    assert response.status_code == 400
    (message,) = response.json()["error"]["fields"]["old_password"]
    assert "bob signs in through Acme Login" in message and "identity provider" in message
    by_admin = as_user(root).post(
        "/api/v1/users/bob/password/", {"temporary_password": NEW}, format="json"
    )
    assert by_admin.status_code == 400
    assert "Acme Login" in by_admin.json()["error"]["fields"]["temporary_password"][0]
    # The dashboard's change page says so instead of offering the form.
    client = Client()
    client.force_login(bob)
    page = client.get("/account/password/").content.decode()
    assert "bob signs in through Acme Login" in page and "Old password" not in page
    # The reset page mails nobody, and reads as it does for any address.
    bob.email = "bob@example.com"
    bob.save()
    sent = Client().post("/password-reset/", {"email": "bob@example.com"})
    assert sent.status_code == 302 and sent["Location"] == "/password-reset/sent/"
    assert mail.outbox == []


def test_an_admins_temporary_password_must_be_changed_at_the_next_sign_in(
    as_user: Any, bob: Any, root: Any
) -> None:
    _token_client(bob)
    session = _signed_in("bob")
    response = as_user(root).post(
        "/api/v1/users/bob/password/", {"temporary_password": NEW}, format="json"
    )
    assert response.status_code == 204, response.content
    assert not AuthToken.objects.filter(user=bob).exists()  # revoked
    assert session.get("/").status_code == 302  # signed out
    assert PasswordState.objects.get(user=bob).must_change
    (event,) = AuditEvent.objects.filter(action="user.password_temporary")
    assert event.actor == root and event.data["tokens_revoked"] == 1
    _no_password_in_audit()

    # Nor does the API hand the temporary password a token (the CLI's `gangway login`).
    refused = APIClient().post(
        "/api/v1/auth/token/", {"username": "bob", "password": NEW}, format="json"
    )
    assert refused.status_code == 403, refused.content
    assert "temporary password" in refused.json()["error"]["message"]
    assert not AuthToken.objects.filter(user=bob).exists()

    client = _signed_in("bob", NEW)
    for path in ("/", "/t/acme/", "/notifications/"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"] == "/account/password/"
    page = client.get("/account/password/")
    assert "A platform admin set a temporary password" in page.content.decode()
    changed = client.post(
        "/account/password/",
        {
            "old_password": NEW,
            "new_password": "my-own-fresh-phrase-31",
            "new_password2": "my-own-fresh-phrase-31",
        },
    )
    assert changed.status_code == 302 and changed["Location"] == "/"
    assert client.get("/").status_code == 200  # still signed in, no longer sent away
    assert not PasswordState.objects.get(user=bob).must_change
    issued = APIClient().post(
        "/api/v1/auth/token/",
        {"username": "bob", "password": "my-own-fresh-phrase-31"},
        format="json",
    )
    assert issued.status_code == 200, issued.content


def test_temporary_passwords_are_for_platform_admins_and_pass_the_validators(
    as_user: Any, alice: Any, bob: Any, root: Any
) -> None:
    url = "/api/v1/users/bob/password/"
    assert as_user(alice).post(url, {"temporary_password": NEW}, format="json").status_code == 403
    weak = as_user(root).post(url, {"temporary_password": "bob"}, format="json")
    assert weak.status_code == 400
    assert "too short" in " ".join(weak.json()["error"]["fields"]["temporary_password"])
    both = as_user(root).post(
        url, {"temporary_password": NEW, "send_reset_link": True}, format="json"
    )
    assert both.status_code == 400 and "exactly one" in both.json()["error"]["message"]
    nobody = as_user(root).post(
        "/api/v1/users/nobody/password/", {"send_reset_link": True}, format="json"
    )
    assert nobody.status_code == 404
    bob.refresh_from_db()
    assert bob.check_password(PASSWORD)


def test_an_admins_reset_link_is_mailed_and_ends_in_a_new_password(
    as_user: Any, bob: Any, root: Any, django_capture_on_commit_callbacks: Any
) -> None:
    bob.email = "bob@example.com"
    bob.save()
    _token_client(bob)
    with django_capture_on_commit_callbacks(execute=True):
        response = as_user(root).post(
            "/api/v1/users/bob/password/", {"send_reset_link": True}, format="json"
        )
    assert response.status_code == 202, response.content
    (message,) = mail.outbox
    assert message.to == ["bob@example.com"]
    link = re.search(r"http://testserver(/password-reset/\S+/\S+/)", str(message.body))
    assert link, message.body
    client = Client()
    form = client.get(link.group(1), follow=True)
    assert form.status_code == 200 and "Choose a new password" in form.content.decode()
    done = client.post(form.redirect_chain[-1][0], {"new_password1": NEW, "new_password2": NEW})
    assert done.status_code == 302 and done["Location"] == "/password-reset/done/"
    bob.refresh_from_db()
    assert bob.check_password(NEW)
    assert not AuthToken.objects.filter(user=bob).exists()
    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions[-2:] == ["user.password_reset_link", "user.password_reset"]
    _no_password_in_audit()


def test_the_schema_lists_the_password_endpoints(api: APIClient) -> None:
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    me = schema["paths"]["/api/v1/users/me/password/"]["post"]
    assert "old_password" in json.dumps(schema["components"]["schemas"])
    assert "204" in me["responses"]
    admin = schema["paths"]["/api/v1/users/{username}/password/"]["post"]
    assert {"202", "204"} <= set(admin["responses"])
