"""The dry-run verdict and submission run one list of checks (services.cluster_request_check).

Whatever submission refuses, the verdict refuses for the same reason — same status, code
and fields — in the API and in the dashboard's verdict panel; what the verdict lets
through ("fits now", "will queue"), submission accepts. Checked on a table of the
refusals found by hand, then as a property over generated requests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.models import ClusterRequest
from tenants.models import GpuFlavor

CREATE = "/api/v1/tenants/acme/clusters/"
DRY_RUN = CREATE + "dry-run/"
PANEL = "/t/acme/clusters/new/verdict/"


def _existing(bob: Any, name: str, state: str, *, flavor: str = "h100", gpus: int = 1) -> None:
    """One of bob's dev clusters, as the services and the pass would have left it."""
    now = timezone.now()
    holds = state in ("admitted", "provisioning", "ready")
    ClusterRequest.objects.create(
        tenant=bob.memberships.get().tenant,
        owner=bob,
        name=name,
        kind="dev",
        flavor=GpuFlavor.objects.get(name=flavor),
        workers=gpus,
        gpus=gpus,
        state=state,
        holds_gpus=holds,
        ttl_hours=8,
        admitted_at=now if holds else None,
        expires_at=now + timedelta(hours=8) if holds else None,
        deleted_at=now if state == "deleted" else None,
    )


@dataclass(frozen=True)
class Outcome:
    """What one interface said about one request: status, error code, fields at fault."""

    status: int
    code: str
    fields: frozenset[str]


def _api(response: Any) -> Outcome:
    body = response.json()
    if response.status_code in (200, 201):
        code = body.get("verdict", "created")
        return Outcome(response.status_code, code, frozenset())
    error = body["error"]
    return Outcome(response.status_code, error["code"], frozenset(error.get("fields", {})))


def _outcomes(client: Any, body: dict[str, Any]) -> tuple[Outcome, Outcome]:
    """(dry-run, create) for one body; nothing the dry-run did is visible to create."""
    verdict = _api(client.post(DRY_RUN, body, format="json"))
    created = _api(client.post(CREATE, body, format="json"))
    return verdict, created


def _agree(verdict: Outcome, created: Outcome) -> None:
    """The verdict foretells submission."""
    if verdict.status == 200 and verdict.code in ("fits_now", "will_queue"):
        assert created.status == 201, (verdict, created)
    elif verdict.status == 200:
        assert verdict.code == "never_fits"
        assert (created.status, created.code) == (400, "never_fits"), (verdict, created)
    else:
        assert verdict == created


Setup = Callable[[Any], None]


def _nothing(bob: Any) -> None:
    return None


def _two_live(bob: Any) -> None:
    _existing(bob, "bob-ready", "ready")
    _existing(bob, "bob-queued", "queued")


def _one_ready_one_suspended(bob: Any) -> None:
    _existing(bob, "bob-ready", "ready")
    _existing(bob, "bob-paused", "suspended")


def _holds_one_gpu(bob: Any) -> None:
    _existing(bob, "bob-one", "ready")


def _deleted_and_two_live(bob: Any) -> None:
    _existing(bob, "bob-gone", "deleted")
    _two_live(bob)


# (what bob has, what he asks, expected create status, code, fields)
REFUSALS: list[tuple[str, Setup, dict[str, Any], int, str, set[str]]] = [
    # The cap counts queued and suspended clusters too: the verdict used to count only
    # admitted ones and promise "fits now".
    ("cap by count, one queued", _two_live, {"flavor": "h100"}, 409, "user_cap", set()),
    (
        "cap by count, one suspended",
        _one_ready_one_suspended,
        {"flavor": "l4"},
        409,
        "user_cap",
        set(),
    ),
    ("cap by GPUs", _holds_one_gpu, {"flavor": "h100", "workers": 2}, 409, "user_cap", set()),
    # A taken name is reported as such, even with the cap reached too.
    (
        "taken name behind the cap",
        _two_live,
        {"flavor": "h100", "name": "bob-ready"},
        400,
        "invalid",
        {"name"},
    ),
    ("taken name", _holds_one_gpu, {"flavor": "h100", "name": "bob-one"}, 400, "invalid", {"name"}),
    ("bad name", _nothing, {"flavor": "h100", "name": "Bob_1"}, 400, "invalid", {"name"}),
    ("reserved name", _nothing, {"flavor": "h100", "name": "new"}, 400, "invalid", {"name"}),
    (
        "ttl over the tenant's",
        _nothing,
        {"flavor": "h100", "ttl_hours": 500},
        400,
        "invalid",
        {"ttl_hours"},
    ),
    (
        "name and shape at once",
        _holds_one_gpu,
        {"flavor": "h100", "name": "bob-one", "workers": 40},
        400,
        "invalid",
        {"name", "workers"},
    ),
    ("unknown flavor", _nothing, {"flavor": "a100"}, 400, "invalid", {"flavor"}),
    (
        "prod by an engineer",
        _nothing,
        {"flavor": "h100", "kind": "prod"},
        403,
        "permission_denied",
        set(),
    ),
    (
        "never fits the tenant's quota",
        _nothing,
        {"flavor": "l4", "workers": 3},
        400,
        "never_fits",
        {"non_field_errors"},
    ),
]


@pytest.mark.parametrize(
    ("setup", "body", "status", "code", "fields"),
    [pytest.param(*row[1:], id=row[0]) for row in REFUSALS],
)
def test_what_submission_refuses_the_verdict_refuses_alike(
    as_user: Any,
    bob: Any,
    setup: Setup,
    body: dict[str, Any],
    status: int,
    code: str,
    fields: set[str],
) -> None:
    setup(bob)
    before = ClusterRequest.objects.count()
    verdict, created = _outcomes(as_user(bob), body)
    assert (created.status, created.code, set(created.fields)) == (status, code, fields)
    assert ClusterRequest.objects.count() == before
    _agree(verdict, created)
    if code == "never_fits":
        assert verdict == Outcome(200, "never_fits", frozenset())


def test_the_panel_shows_submissions_refusal(bob: Any) -> None:
    _two_live(bob)
    client = Client()
    client.force_login(bob)
    form = {"kind": "dev", "flavor": "h100", "workers": 1}
    html = client.post(PANEL, form).content.decode()
    assert 'data-verdict="refused" data-code="user_cap"' in html
    assert "You already have 2 dev clusters in acme" in html
    html = client.post(PANEL, {**form, "name": "bob-ready"}).content.decode()
    assert 'data-verdict="invalid"' in html
    assert "Name: A cluster named &#x27;bob-ready&#x27; already exists in acme" in html
    # Submitting the same form is refused for the same reasons.
    page = client.post("/t/acme/clusters/new/", form)
    assert page.status_code == 409 and "You already have 2 dev clusters" in page.content.decode()
    page = client.post("/t/acme/clusters/new/", {**form, "name": "bob-ready"})
    assert page.status_code == 400 and page.context["form"].errors["name"]


def test_a_deleted_namesake_does_not_count(as_user: Any, bob: Any) -> None:
    _existing(bob, "bob-gone", "deleted")
    verdict, created = _outcomes(as_user(bob), {"flavor": "h100", "name": "bob-gone"})
    assert verdict.code == "fits_now" and created.status == 201


SETUPS = [_nothing, _holds_one_gpu, _two_live, _one_ready_one_suspended, _deleted_and_two_live]
NAMES = [None, "bob-ready", "bob-one", "bob-gone", "fresh", "new", "Bad_Name"]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    setup=st.sampled_from(SETUPS),
    flavor=st.sampled_from(["h100", "l4", "a100"]),
    workers=st.integers(min_value=0, max_value=20),
    name=st.sampled_from(NAMES),
    ttl=st.sampled_from([None, 1, 72, 73]),
    cap_gpus=st.sampled_from([1, 2, 8]),
)
def test_the_verdict_foretells_submission(
    as_user: Any,
    bob: Any,
    acme: Any,
    setup: Setup,
    flavor: str,
    workers: int,
    name: str | None,
    ttl: int | None,
    cap_gpus: int,
) -> None:
    body: dict[str, Any] = {"flavor": flavor, "workers": workers}
    if name is not None:
        body["name"] = name
    if ttl is not None:
        body["ttl_hours"] = ttl
    with transaction.atomic():
        acme.max_dev_gpus_per_user = cap_gpus
        acme.save()
        setup(bob)
        verdict, created = _outcomes(as_user(bob), body)
        _agree(verdict, created)
        transaction.set_rollback(True)


def test_past_its_own_quota_a_request_is_judged_with_its_cohort(
    as_user: Any, alice: Any, acme: Any, globex: Any
) -> None:
    """Submission first asks "could it ever fit?" of the tenant's own quota; a request
    past it is judged again with the cohort, which lets it borrow (acme: 16 H100s of
    its own, 8 more to borrow; the fleet has 32)."""
    api = as_user(alice)
    three = {"kind": "prod", "flavor": "h100", "workers": 3, "name": "three"}  # 24 GPUs

    # Alone in its cohort there is nobody to borrow from: never fits, said at once.
    acme.cohort = "lab"
    acme.save()
    globex.cohort = "elsewhere"
    globex.save()
    refused = api.post(CREATE, three, format="json")
    assert refused.status_code == 400, refused.content
    assert "acme may hold at most 16" in refused.content.decode()
    assert not ClusterRequest.objects.filter(name="three").exists()

    # With globex in the same cohort, acme may hold its 16 plus 8 borrowed.
    globex.cohort = "lab"
    globex.save()
    assert api.post(CREATE, three, format="json").status_code == 201
    four = {**three, "workers": 4, "name": "four"}  # 32 GPUs: past the borrowing limit too
    refused = api.post(CREATE, four, format="json")
    assert refused.status_code == 400, refused.content
    assert "acme may hold at most 24" in refused.content.decode()
