"""The signed tokens between the product and the Ray dashboard's own origin
(clusters.live.ray_grants): a grant opens once, a session cookie carries no path, and
neither can be forged or swapped for the other."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import signing

from clusters.live.ray_grants import (
    issue_grant,
    read_session,
    redeem_grant,
    session_cookie_value,
)
from tenants.models import Role

pytestmark = pytest.mark.django_db


@pytest.fixture
def grant(make_cluster: Any, bob: Any) -> tuple[Any, str]:
    cluster = make_cluster()
    cluster.save()
    token = issue_grant(cluster=cluster, user=bob, role=Role.ENGINEER, next_path="/#/jobs?x=1")
    return cluster, token


def test_a_grant_names_the_cluster_user_role_and_path_and_opens_once(
    grant: tuple[Any, str], bob: Any
) -> None:
    cluster, token = grant
    opened = redeem_grant(token)
    assert opened is not None
    assert (opened.slug, opened.name, opened.cluster_id) == ("acme", cluster.name, cluster.pk)
    assert (opened.user_id, opened.role, opened.next) == (bob.pk, Role.ENGINEER, "/#/jobs?x=1")
    assert redeem_grant(token) is None  # used before


def test_a_forged_or_expired_grant_opens_nothing(grant: tuple[Any, str], settings: Any) -> None:
    _, token = grant
    assert redeem_grant(token[:-2] + "xx") is None
    assert redeem_grant(signing.dumps({"t": "acme"}, salt="gangway.rayproxy.grant")) is None
    settings.RAY_PROXY_GRANT_SECONDS = -1
    assert redeem_grant(token) is None


def test_the_session_keeps_who_and_which_cluster_but_not_the_path(
    grant: tuple[Any, str],
) -> None:
    _, token = grant
    opened = redeem_grant(token)
    assert opened is not None
    value = session_cookie_value(opened)
    session = read_session(value)
    assert session is not None
    assert (session.cluster_id, session.user_id, session.sid) == (
        opened.cluster_id,
        opened.user_id,
        opened.sid,
    )
    assert session.next == ""
    # Neither token stands for the other (different salts), and no cookie is no session.
    assert read_session(token) is None
    assert redeem_grant(value) is None
    assert read_session("") is None
