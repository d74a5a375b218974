"""``gangway service token create|ls|rm`` through the live API, and the endpoint in
``service status``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from clusters.kinds.rayservice.endpoint_access import token_digest
from clusters.models import ServiceToken
from tests.cli.conftest import Run
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION

pytestmark = pytest.mark.django_db(transaction=True)

Cli = Callable[..., Run]


def test_invoke_tokens_are_created_listed_and_revoked(cli: Cli, login: Any, bob: Any) -> None:
    login("bob")
    submitted = cli(
        "service", "submit", "--name", "sd", "-f", "l4", "-c", "-", stdin=STABLE_DIFFUSION
    )
    assert submitted.code == 0, submitted
    made = cli("service", "token", "create", "sd", "--name", "frontend")
    assert made.code == 0, made
    secret = made.out.strip()
    assert secret.startswith("gws_") and "not shown again" in made.err
    assert ServiceToken.objects.get(name="frontend").digest == token_digest(secret)

    listed = cli("service", "token", "ls", "sd")
    assert listed.code == 0, listed
    assert "frontend" in listed.out and "never" in listed.out and secret not in listed.out
    token_id = cli("service", "token", "ls", "sd", "-o", "json").json()["results"][0]["id"]

    status = cli("service", "status", "sd")
    assert "/serve/acme/sd/" in status.out, status

    gone = cli("service", "token", "rm", "sd", str(token_id))
    assert gone.code == 0, gone
    assert not ServiceToken.objects.exists()
    again = cli("service", "token", "rm", "sd", str(token_id))
    assert again.code != 0 and f"token {token_id}" in again.err, again
    missing = cli("service", "token", "create", "nosuch", "--name", "x")
    assert missing.code != 0 and "service 'nosuch'" in missing.err, missing
