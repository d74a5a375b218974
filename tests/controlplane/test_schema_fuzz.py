"""The API against its own OpenAPI schema, fuzzed with schemathesis.

Every operation of ``/api/schema/`` is called with generated requests, valid ones and
ones that break the schema, as an engineer, a tenant admin and a platform admin; the
stateful run then chains operations along the links schemathesis infers from the
schema (list tenants, read one, add a member, suspend a cluster it listed, ...); and
the valid request the access tables hold for every route checks each success response
for certain. Every response must not be a server error and must have a status code,
content type and body the schema documents for the operation (errors included); a
request the schema calls invalid must be refused with a 4xx.

The app is called in-process through Django's WSGI handler, inside the test's
transaction on the real PostgreSQL database: each example (or scenario) is rolled back
to the fixture's rows, and ``on_commit`` nudges to Celery never fire, so a cluster
request just stays queued and no worker or broker is needed. Path parameters and a few
body fields draw from the names of the fixture's objects most of the time (random
otherwise), so that requests get past the 404s. The number of examples is bounded to
keep the suite fast (about 800 requests); raise the constants below for a deeper run.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck, given, settings
from knox.models import AuthToken
from schemathesis.checks import not_a_server_error
from schemathesis.core import NOT_SET
from schemathesis.errors import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from tests.access.matrix import ACTORS, Case, Route, url_kwargs
from tests.access.routes_clusters import _bobs
from tests.access.test_route_matrix import ROUTES, world  # noqa: F401 (fixture)

# Examples per operation and actor (positive, negative), and stateful scenarios per actor.
# ``make reliability`` (reliability/abuse.py) raises them through the environment.
POSITIVE_EXAMPLES = int(os.environ.get("SCHEMA_FUZZ_EXAMPLES", "5"))
NEGATIVE_EXAMPLES = int(os.environ.get("SCHEMA_FUZZ_NEGATIVE_EXAMPLES", "2"))
SCENARIOS = int(os.environ.get("SCHEMA_FUZZ_SCENARIOS", "6"))
SCENARIO_STEPS = 8

# bob (engineer) and alice (tenant admin) of acme, and root (platform admin); the
# reliability run adds vera (viewer) and charlie (an engineer of another tenant).
FUZZERS = tuple(os.environ.get("SCHEMA_FUZZ_ACTORS", "engineer,admin,platform").split(","))

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    # A request the schema says is invalid (a string for page_size, say) is refused.
    negative_data_rejection,
]

# Names of the fixture's objects, drawn for path parameters and body fields.
CONFIG = {
    "dictionaries": {
        "tenants": {"values": ["acme", "globex"]},
        "users": {"values": ["bob", "vera", "dave", "charlie"]},
        "names": {"values": ["h100", "l4", "spare", "bob-dev", "bob-paused"]},
        "flavors": {"values": ["h100", "l4"]},
    },
    "parameters": {
        "path.tenant_slug": {"dictionary": "tenants", "probability": 0.8},
        "path.slug": {"dictionary": "tenants", "probability": 0.8},
        "path.username": {"dictionary": "users", "probability": 0.7},
        "path.name": {"dictionary": "names", "probability": 0.7},
        "body.flavor": {"dictionary": "flavors", "probability": 0.7},
        "body.username": {"dictionary": "users", "probability": 0.7},
    },
}


@contextmanager
def _connections_kept_open() -> Iterator[None]:
    """Django closes the database connection around a request whose connection is not in
    autocommit mode, which a test's transaction never is (the test client turns that off
    for its requests; so does this, while the WSGI handler is called directly)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture(scope="module")
def schema() -> Any:
    """The schema as the app serves it (serving it needs no database)."""
    with _connections_kept_open():
        return schemathesis.openapi.from_wsgi(
            "/api/schema/", WSGIHandler(), config=schemathesis.Config.from_dict(CONFIG)
        )


@pytest.fixture
def headers(world: Any) -> Iterator[dict[str, dict[str, str]]]:  # noqa: F811
    """Token headers of the fuzzing actors, over the access tables' world (acme with
    alice, bob and vera, globex with charlie, root, dave, a spare flavor) plus bob's
    ready and suspended clusters."""
    _bobs("ready")(world)
    _bobs("suspended", "bob-paused")(world)
    out = {}
    for actor in FUZZERS:
        _, key = AuthToken.objects.create(user=world.actors[actor])
        out[actor] = {"Authorization": f"Token {key}"}
    with _connections_kept_open():
        yield out


class Findings:
    """Requests made and check failures, reported together at the end of a run."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.failures: list[str] = []

    def check(self, case: Any, response: Any, headers: dict[str, str]) -> None:
        self.requests[f"{case.operation.label} -> {response.status_code}"] += 1
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        # One failed check is an AssertionError, several a FailureGroup.
        except (AssertionError, FailureGroup) as exc:
            self.failures.append(f"{case.operation.label}: {exc}")

    def assert_clean(self) -> None:
        statuses = Counter(label.rsplit(" ", 1)[1] for label in self.requests.elements())
        print(f"{self.requests.total()} requests, by status: {dict(sorted(statuses.items()))}")
        assert self.requests, "no request was made"
        assert not self.failures, f"{len(self.failures)} failing cases:\n\n" + "\n\n".join(
            self.failures[:10]
        )


@pytest.mark.parametrize("actor", FUZZERS)
def test_every_operation_conforms_to_the_schema(
    schema: Any, headers: dict[str, dict[str, str]], actor: str
) -> None:
    auth = headers[actor]
    findings = Findings()
    for result in schema.get_all_operations():
        operation = result.ok()
        runs = [(schemathesis.GenerationMode.POSITIVE, POSITIVE_EXAMPLES)]
        if operation.body or operation.query:
            # Only a body or a query can be made invalid and still reach the view (an
            # invalid path parameter is a 404 from the URL resolver, tested elsewhere).
            runs.append((schemathesis.GenerationMode.NEGATIVE, NEGATIVE_EXAMPLES))
        for mode, examples in runs:

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=examples,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            )
            def call(case: Any) -> None:
                # Each example starts from the fixture's rows, whatever the last one wrote.
                with transaction.atomic():
                    findings.check(case, case.call(headers=auth), auth)
                    transaction.set_rollback(True)

            call()
    findings.assert_clean()
    # Every operation was called: none of them errored out before sending a request.
    called = {label.rsplit(" -> ", 1)[0] for label in findings.requests}
    assert called == {result.ok().label for result in schema.get_all_operations()}


@pytest.mark.parametrize("actor", FUZZERS)
def test_chained_operations_conform_to_the_schema(
    schema: Any, headers: dict[str, dict[str, str]], actor: str
) -> None:
    auth = headers[actor]
    findings = Findings()

    class Scenarios(schema.as_state_machine()):  # type: ignore[misc]
        # Each scenario starts from the fixture's rows: Hypothesis replays scenarios, and
        # a replay must see the same state as the first run to take the same steps.
        def setup(self) -> None:
            self.savepoint = transaction.savepoint()

        def teardown(self) -> None:
            transaction.savepoint_rollback(self.savepoint)

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": auth}

        def validate_response(self, response: Any, case: Any, *args: Any, **kwargs: Any) -> None:
            findings.check(case, response, auth)

    Scenarios.run(
        settings=settings(
            max_examples=SCENARIOS,
            stateful_step_count=SCENARIO_STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
    )
    findings.assert_clean()
    # Scenarios chained operations rather than repeating one.
    assert len({label.rsplit(" -> ", 1)[0] for label in findings.requests}) > 1


def _describing(schema: Any, case: Any, method: str) -> Any:
    """``case`` (its path parameters and query) sent as ``method``, with no body."""
    return type(case)(
        case.operation,
        method,
        case.path,
        path_parameters=case.path_parameters,
        query=case.query,
        meta=case._meta,
    )


@pytest.mark.parametrize("actor", FUZZERS)
def test_head_and_options_of_every_path_never_fail(
    schema: Any, headers: dict[str, dict[str, str]], actor: str
) -> None:
    # The schema documents no HEAD or OPTIONS, but the server answers both on every
    # path: generated path parameters and queries are sent with each, and the answer
    # is never a server error. OPTIONS names only methods the schema documents for the
    # path; HEAD gets the status GET gets (the WSGI server drops HEAD's body, and
    # tests/access/test_options_head.py checks that through Django's client).
    auth = headers[actor]
    documented: dict[str, set[str]] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        documented.setdefault(operation.path, set()).add(operation.method.upper())
    requests: Counter[str] = Counter()
    failures: list[str] = []
    seen: set[str] = set()
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path in seen:
            continue
        seen.add(operation.path)

        @given(case=operation.as_strategy(generation_mode=schemathesis.GenerationMode.POSITIVE))
        @settings(
            max_examples=POSITIVE_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck)
        )
        def call(case: Any) -> None:
            for method in ("HEAD", "OPTIONS"):
                probe = _describing(schema, case, method)
                with transaction.atomic():
                    response = probe.call(headers=auth)
                    transaction.set_rollback(True)
                label = f"{method} {case.operation.path} -> {response.status_code}"
                requests[label] += 1
                if response.status_code >= 500:
                    failures.append(f"{label}: {response.text[:300]}")
                elif method == "HEAD" and "GET" in documented[case.operation.path]:
                    with transaction.atomic():
                        get = _describing(schema, case, "GET").call(headers=auth)
                        transaction.set_rollback(True)
                    if get.status_code != response.status_code:
                        failures.append(f"{label}: GET is a {get.status_code}")
                elif method == "OPTIONS" and response.status_code == 200:
                    if "json" not in response.headers.get("Content-Type", ""):
                        continue  # ?format=yaml: the same document in YAML
                    named = set(response.json()["methods"])
                    if not named <= documented[case.operation.path]:
                        failures.append(f"{label}: names {sorted(named)}")

        call()
    statuses = Counter(label.rsplit(" ", 1)[1] for label in requests.elements())
    print(f"{requests.total()} requests, by status: {dict(sorted(statuses.items()))}")
    assert {label.split(" -> ")[0] for label in requests} == {
        f"{method} {path}" for path in documented for method in ("HEAD", "OPTIONS")
    }
    assert not failures, "\n".join(failures[:10])


def _successes() -> list[Any]:
    return [
        pytest.param(template, method, route, case, id=f"{method} {template}")
        for template, route in sorted(ROUTES.items())
        # The Ray dashboard proxy answers what the dashboard answers: not in the schema.
        if template.startswith("api/v1/") and not route.passthrough
        for method, case in sorted(route.methods.items())
    ]


@pytest.mark.parametrize(("template", "method", "route", "case"), _successes())
def test_every_success_of_the_access_tables_conforms_to_the_schema(
    schema: Any,
    world: Any,  # noqa: F811
    template: str,
    method: str,
    route: Route,
    case: Case,
) -> None:
    # Generated requests seldom get past validation to a 2xx; the access tables hold a
    # valid request for every route, so every success response is checked for certain.
    kwargs = url_kwargs(world, route, case)
    actor = next(actor for actor in ACTORS if case.expect[actor] < 300)
    auth = {}
    if world.actors[actor] is not None:
        _, key = AuthToken.objects.create(user=world.actors[actor])
        auth = {"Authorization": f"Token {key}"}
    request = schema[f"/{template}"][method].Case(
        path_parameters=kwargs,
        body=case.body(world) if case.body else NOT_SET,
        media_type="application/json" if case.body else None,
    )
    with _connections_kept_open():
        response = request.call(headers=auth)
    assert response.status_code == case.expect[actor], response.text[:300]
    request.validate_response(response, checks=CHECKS, headers=auth)
