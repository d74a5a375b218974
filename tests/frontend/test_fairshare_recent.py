"""Usage-decayed fair share on the pages: the fair-share page's recent GPU-hours and
standing, and the queue pages' note on what a tenant's recent usage does to its requests."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from clusters.domain.states import State
from clusters.models import ClusterRequest
from clusters.queue.admission_pass import run_admission_pass
from clusters.requests import services
from clusters.rows.spec import ClusterSpec
from tests.factories import usage_span
from tests.frontend.conftest import make_ready
from tests.frontend.test_pages import client_for


def _create(actor: Any, tenant: Any, name: str, h100: Any) -> ClusterRequest:
    spec = ClusterSpec(name=name, kind="prod", flavor=h100, workers=1)
    return services.cluster_request_create(actor=actor, tenant=tenant, spec=spec)


@pytest.fixture
def contended(root: Any, alice: Any, acme: Any, globex: Any, h100: Any) -> Any:
    """The 32 H100s are full, 16 each; acme held 16 more all last week. Each tenant then
    asks for one more node, acme first."""
    for i in range(2):
        make_ready(_create(alice, acme, f"a{i}", h100))
        make_ready(_create(root, globex, f"g{i}", h100))
    now = timezone.now()
    usage_span(
        tenant=acme,
        owner=alice,
        flavor=h100,
        gpus=16,
        start=now - timedelta(days=7),
        end=now - timedelta(hours=1),
    )
    _create(alice, acme, "a-waits", h100)
    _create(root, globex, "g-waits", h100)


def _row(html: str, tenant: str) -> str:
    match = re.search(rf'<tbody data-tenant="{tenant}">(.*?)</tbody>', html, re.S)
    assert match, tenant
    return match.group(1)


def test_the_fair_share_page_shows_recent_hours_and_standing(
    contended: Any, root: Any, settings: Any
) -> None:
    settings.FAIR_SHARE_HALF_LIFE_HOURS = 168
    html = client_for(root).get("/fair-share/").content.decode()
    assert "recent usage counts, half-life 7 days" in html
    acme, globex = _row(html, "acme"), _row(html, "globex")
    hours = re.search(r"data-recent-hours>([\d,]+)<", acme)
    assert hours and 1900 < int(hours.group(1).replace(",", "")) < 1960
    assert "over its share:" in acme and "under its share:" in globex
    # Next in line first: globex, now that acme's week counts.
    assert html.index('data-tenant="globex"') < html.index('data-tenant="acme"')


def test_the_page_is_as_before_when_off(contended: Any, root: Any, settings: Any) -> None:
    settings.FAIR_SHARE_HALF_LIFE_HOURS = 0
    html = client_for(root).get("/fair-share/").content.decode()
    assert "data-recent-hours" not in html and "Standing" not in html


def test_small_recent_usage_reads_to_the_tenth() -> None:
    from frontend.templatetags.gangway import hours

    assert [hours(v) for v in (0, 0.04, 0.36, 9.96, 10.4, 1923.4)] == [
        "0",
        "0",
        "0.4",
        "10",
        "10",
        "1,923",
    ]


def test_the_queue_says_what_recent_usage_does_to_a_request(
    contended: Any, root: Any, alice: Any, settings: Any
) -> None:
    settings.FAIR_SHARE_HALF_LIFE_HOURS = 168
    run_admission_pass()
    a_waits = ClusterRequest.objects.get(name="a-waits")
    g_waits = ClusterRequest.objects.get(name="g-waits")
    assert a_waits.state == g_waits.state == State.QUEUED
    assert g_waits.queue_flavor_position == 1 and a_waits.queue_flavor_position == 2
    admin_view = client_for(root).get("/queue/").content.decode()
    assert re.search(
        r"Globex is ahead: acme used 1,9\d\d GPU-hours in the last weeks \(half-life 7 days\)",
        admin_view,
    )
    own_view = client_for(alice).get("/t/acme/queue/").content.decode()
    assert "Another team is ahead: acme used 1,9" in own_view
    assert "acme&#x27;s requests go after it" in own_view and "globex" not in own_view


def test_off_the_older_request_goes_first(contended: Any, settings: Any) -> None:
    settings.FAIR_SHARE_HALF_LIFE_HOURS = 0
    run_admission_pass()
    a_waits = ClusterRequest.objects.get(name="a-waits")
    assert a_waits.queue_flavor_position == 1


def test_a_waiting_requests_page_says_what_its_tenants_recent_usage_does(
    contended: Any, alice: Any, charlie: Any, settings: Any
) -> None:
    settings.FAIR_SHARE_HALF_LIFE_HOURS = 168
    run_admission_pass()
    page = client_for(alice).get("/t/acme/clusters/a-waits/").content.decode()
    assert re.search(
        r"Recent usage counts in the queue \(half-life 7 days\): acme used 1,9\d\d GPU-hours, "
        r"\d+% of its cohort&#x27;s, against 50% by weight, so its requests go after those of "
        r"teams under their share\.",
        page,
    )
    assert "globex" not in page
    settings.FAIR_SHARE_HALF_LIFE_HOURS = 0
    page = client_for(alice).get("/t/acme/clusters/a-waits/").content.decode()
    assert "data-recent-usage" not in page
