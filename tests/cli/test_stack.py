"""The real CLI (a subprocess) against the real stack: the live server, and for the
full sessions a Celery worker and kubesim (tests/clusters/engine/conftest.py).

Each test signs in through ``gangway login`` as one of the shared fixture users (bob,
an engineer of acme) and checks what is printed and the exit code; the API (or the
database) says what really happened.
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from knox.models import AuthToken

from clusters.models import ClusterRequest
from clusters.queue.admission_pass import run_admission_pass
from gangway_cli import exitcodes
from gangway_cli.kinds import rayjob
from tenants.models import Quota
from tests.cli.conftest import Run
from tests.clusters.engine.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

CLUSTERS = "/api/v1/tenants/acme/clusters/"
Cli = Callable[..., Run]


@pytest.fixture
def quiet(monkeypatch: Any) -> None:
    """No worker in this test: the services' after-commit nudges are dropped."""
    from clusters.rows import enqueue

    monkeypatch.setattr(enqueue, "send", lambda *a, **k: None)


def test_a_session_from_up_to_down(
    cli: Cli, login: Any, bob: Any, worker: Any, kubesim: Any, live_server: Any, as_user: Any
) -> None:
    signed_in = login("bob")
    assert "Signed in to" in signed_in.out and "acme (engineer)" in signed_in.out
    who = cli("whoami")
    assert who.code == 0 and "bob" in who.out and "engineer" in who.out

    up = cli("up", "bob-cli", "--flavor", "h100", "--ttl", "4h", "--env", "GREETING=hi")
    assert up.code == 0, up
    assert "Fits now on h100: 1 GPU charged." in up.err and "Requested bob-cli in acme." in up.err
    assert "provisioning -> ready" in up.err  # the live transitions, from its timeline
    dashboard_url = f"{live_server.url}/t/acme/clusters/bob-cli/ray/"
    assert "bob-cli is ready." in up.out and dashboard_url in up.out
    assert 'ray.init("ray://bob-cli-head-svc.gw-acme.svc:10001")' in up.out
    detail = as_user(bob).get(CLUSTERS + "bob-cli/").json()
    assert detail["state"] == "ready" and detail["env"] == {"GREETING": "hi"}
    assert detail["ttl_hours"] == 4

    listed = cli("ls")
    assert listed.code == 0 and "bob-cli" in listed.out and "ready" in listed.out
    status = cli("status", "bob-cli")
    assert status.code == 0 and "Timeline" in status.out
    assert "queued -> admitted" in status.out and "provisioning -> ready" in status.out
    logs = cli("logs", "bob-cli", "--tail", "20")
    assert logs.code == 0 and logs.out.strip(), logs
    manifests = cli("manifests", "bob-cli")
    assert manifests.code == 0 and "kind: RayCluster" in manifests.out
    assert "name: bob-cli" in manifests.out

    before = detail["expires_at"]
    extended = cli("extend", "bob-cli", "2h")
    assert extended.code == 0 and "now expires" in extended.out, extended
    after = as_user(bob).get(CLUSTERS + "bob-cli/").json()["expires_at"]
    assert after > before
    fraction = cli("extend", "bob-cli", "90m")
    assert fraction.code == exitcodes.USAGE and "whole number of hours" in fraction.err

    shown = cli("dashboard", "bob-cli", "--print")
    assert shown.code == 0 and shown.out.strip() == dashboard_url
    assert cli("keepalive", "bob-cli").code == 0

    suspended = cli("suspend", "bob-cli", "--reason", "lunch", "-o", "json")
    assert suspended.code == 0 and suspended.json()["state"] == "suspended", suspended
    not_ready = cli("dashboard", "bob-cli", "--print")
    assert not_ready.code == exitcodes.REFUSED and "once it is ready" in not_ready.err
    resumed = cli("resume", "bob-cli", "-o", "json")
    assert resumed.code == 0, resumed
    assert resumed.json()["state"] in ("queued", "admitted", "provisioning", "ready")

    down = cli("down", "bob-cli", "--wait")
    assert down.code == 0 and "bob-cli deleted." in down.out, down
    gone = cli("status", "bob-cli")
    assert gone.code == exitcodes.NOT_FOUND
    assert "cluster 'bob-cli' in tenant 'acme' was not found" in gone.err


def test_a_followed_job_streams_its_log_and_exits_with_its_outcome(
    cli: Cli, login: Any, bob: Any, worker: Any, kubesim: Any
) -> None:
    login("bob")
    kubesim.set_rayjob_defaults(run_seconds=2, pending_seconds=0, outcome="succeeded")
    ok = cli(
        "job",
        "submit",
        "--entrypoint",
        "python train.py",
        "--flavor",
        "l4",
        "--name",
        "train-ok",
        "--follow",
    )
    assert ok.code == 0, ok
    assert "[python train.py] step 1" in ok.out and "succeeded" in ok.out
    assert "train-ok succeeded" in ok.err

    kubesim.set_rayjob_defaults(outcome="failed", message="CUDA out of memory")
    failed = cli(
        "job", "submit", "-c", "python big.py", "-f", "l4", "--name", "train-oom", "--follow"
    )
    assert failed.code == rayjob.FAILED, failed
    assert "CUDA out of memory" in failed.err and "train-oom failed" in failed.err
    listed = cli("job", "ls", "-o", "json")
    states = {job["name"]: job["state"] for job in listed.json()}
    assert states == {"train-ok": "succeeded", "train-oom": "failed"}


def test_a_job_says_the_flavor_it_got_of_those_it_accepted(
    cli: Cli, login: Any, alice: Any, bob: Any, worker: Any, kubesim: Any, as_user: Any
) -> None:
    # acme's one L4 GPU is alice's: bob's job, which prefers l4, gets h100.
    Quota.objects.filter(tenant__slug="acme", flavor__name="l4").update(gpus=1, borrow_limit=0)
    taken = {"name": "alice-l4", "kind": "dev", "flavor": "l4"}
    assert as_user(alice).post(CLUSTERS, taken, format="json").status_code == 201
    wait_for(lambda: ClusterRequest.objects.get(name="alice-l4").state == "ready", what="l4 taken")
    kubesim.set_rayjob_defaults(run_seconds=30, pending_seconds=0, outcome="succeeded")
    login("bob")
    submitted = cli("job", "submit", "-c", "python train.py", "-f", "l4,h100", "--name", "pick")
    assert submitted.code == 0, submitted
    wait_for(lambda: ClusterRequest.objects.get(name="pick").admitted_at, what="the job admitted")

    listed = cli("job", "ls")
    assert listed.code == 0, listed
    (line,) = [row for row in listed.out.splitlines() if " pick " in f" {row} "]
    assert "h100" in line and "l4" not in line, listed.out
    status = cli("job", "status", "pick")
    assert status.code == 0, status
    (flavor,) = [row for row in status.out.splitlines() if row.strip().startswith("flavor")]
    assert flavor.split() == ["flavor", "h100"], status.out
    # Its timeline: what it accepted when submitted, the one it got when admitted.
    assert "job submitted (accepts l4, h100, in that order)" in status.out, status.out
    assert "admitted on h100" in status.out and "(on l4)" not in status.out


def test_a_held_request_gives_one_reason_everywhere(
    cli: Cli, login: Any, alice: Any, bob: Any, as_user: Any, quiet: None
) -> None:
    body = {"name": "bob-wait", "flavor": "l4"}
    assert as_user(bob).post(CLUSTERS, body, format="json").status_code == 201
    held = as_user(alice).post(CLUSTERS + "bob-wait/hold/", {"reason": "budget review"})
    assert held.status_code == 200, held.content
    run_admission_pass()  # a pass passes over it and leaves its reason alone
    said = "On hold by alice: budget review"

    queue = as_user(bob).get(CLUSTERS + "bob-wait/").json()["queue"]
    assert (queue["reason"], queue["message"]) == ("held", said)
    pages = Client()
    pages.force_login(bob)
    for url in ("/t/acme/", "/t/acme/queue/", "/t/acme/clusters/bob-wait/"):
        html = pages.get(url).content.decode()
        assert said in html, url
        assert "waiting for the next admission pass" not in html, url
    login("bob")
    status = cli("status", "bob-wait")
    assert status.code == 0 and f"held: {said}" in status.out, status
    listed = cli("ls", "-o", "json")
    (row,) = [c for c in listed.json() if c["name"] == "bob-wait"]
    assert row["queue"]["message"] == said


def test_json_output_is_the_apis_json(
    cli: Cli, login: Any, bob: Any, as_user: Any, quiet: None
) -> None:
    login("bob")
    api = as_user(bob)
    # acme keeps one L4: the pass admits json-a and json-b waits, with its position and
    # reason, in the queue compared below.
    Quota.objects.filter(tenant__slug="acme", flavor__name="l4").update(gpus=1)
    for name in ("json-a", "json-b"):
        body = {"name": name, "flavor": "l4"}
        assert api.post(CLUSTERS, body, format="json").status_code == 201
    run_admission_pass()
    listed = cli("ls", "-o", "json")
    assert listed.code == 0, listed
    assert listed.json() == api.get(CLUSTERS, {"ordering": "-created_at"}).json()["results"]
    detail = cli("-o", "json", "status", "json-a")  # the global form of the option
    assert detail.json() == api.get(CLUSTERS + "json-a/").json()
    assert cli("whoami", "-o", "json").json() == api.get("/api/v1/users/me/").json()
    queue = api.get("/api/v1/tenants/acme/queue/").json()["results"]
    assert [item["name"] for item in queue] == ["json-b"]
    assert cli("queue", "-o", "json").json() == queue
    shown = cli("queue")
    assert shown.code == 0 and "json-b" in shown.out, shown


def test_a_request_that_never_fits_is_refused_before_it_is_made(
    cli: Cli, login: Any, bob: Any, quiet: None
) -> None:
    login("bob")
    # An engineer of acme may hold at most 2 dev GPUs: ten one-GPU workers never fit.
    refused = cli("up", "huge", "--flavor", "h100", "--workers", "10")
    assert refused.code == exitcodes.NEVER_FITS, refused
    assert "Never fits" in refused.err and "can never fit" in refused.err
    assert "user_cap: It needs 10 GPUs" in refused.err and "at most 2 dev GPUs" in refused.err
    as_json = cli("up", "huge", "--flavor", "h100", "--workers", "10", "-o", "json")
    assert as_json.code == exitcodes.NEVER_FITS
    assert as_json.json()["verdict"] == "never_fits" and as_json.json()["reasons"]
    assert not ClusterRequest.objects.unscoped().exists()


def test_an_expired_or_revoked_token_says_to_sign_in_again(cli: Cli, login: Any, bob: Any) -> None:
    nobody = cli("ls")
    assert nobody.code == exitcodes.AUTH and "not signed in" in nobody.err
    login("bob")
    AuthToken.objects.filter(user=bob).update(expiry=timezone.now() - timedelta(minutes=1))
    expired = cli("ls")
    assert expired.code == exitcodes.AUTH, expired
    assert "expired or was revoked" in expired.err and "gangway login" in expired.err

    login("bob")
    AuthToken.objects.filter(user=bob).delete()  # revoked, e.g. "revoke all" elsewhere
    revoked = cli("ls", "-o", "json")
    assert revoked.code == exitcodes.AUTH
    assert revoked.json()["error"]["code"] == "authentication_failed"

    login("bob")
    out = cli("logout")
    assert out.code == 0 and "token revoked" in out.out
    assert not AuthToken.objects.filter(user=bob).exists()
    assert cli("whoami").code == exitcodes.AUTH


def test_the_config_file_is_private(
    cli: Cli, login: Any, bob: Any, config_home: Path, live_server: Any
) -> None:
    wrong = cli("login", "--username", "bob", "--password-stdin", stdin="nope\n")
    assert wrong.code == exitcodes.REFUSED and "Unable to log in" in wrong.err
    assert not (config_home / "gangway" / "config.json").exists()
    login("bob")
    path = config_home / "gangway" / "config.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    text = path.read_text()
    assert live_server.url in text and '"kind": "token"' in text
    # GANGWAY_TOKEN wins over the file (CI): here, a token nobody issued.
    assert cli("whoami", env={"GANGWAY_TOKEN": "not-a-token"}).code == exitcodes.AUTH


def test_up_shows_the_verdict_in_english_with_what_is_charged(
    cli: Cli, login: Any, alice: Any, as_user: Any, quiet: None
) -> None:
    login("alice")
    prod = cli("up", "big", "--kind", "prod", "--workers", "2", "--flavor", "h100", "--no-wait")
    assert prod.code == 0, prod
    assert "Fits now on h100: 2 whole nodes, 16 GPUs charged." in prod.err
    assert "alternative: l4 fits now (2 whole nodes, 2 GPUs charged)" in prod.err
    # acme keeps one L4 and "first" takes it at the next pass: the next one waits.
    Quota.objects.filter(tenant__slug="acme", flavor__name="l4").update(gpus=1)
    assert as_user(alice).post(CLUSTERS, {"name": "first", "flavor": "l4"}, format="json")
    queued = cli("up", "second", "--flavor", "l4", "--no-wait")
    assert queued.code == 0, queued
    assert (
        "Will queue on l4 (1 GPU charged): #1 in acme's queue, expected to start in about 8 h."
    ) in queued.err
    assert "\N{MULTIPLICATION SIGN}" not in queued.err + prod.err
    assert " in now" not in queued.err + prod.err


def test_status_says_why_a_cluster_cannot_start(
    cli: Cli, login: Any, bob: Any, as_user: Any, worker: Any, kubesim: Any
) -> None:
    # kubesim's knob: the workers of this cluster crash (its README, "Pod failures").
    kubesim.set_container_fault("gw-acme", "ray.io/cluster=crashy,ray.io/node-type=worker", "crash")
    body = {"name": "crashy", "flavor": "l4"}
    assert as_user(bob).post(CLUSTERS, body, format="json").status_code == 201
    wait_for(
        lambda: (
            ClusterRequest.objects.unscoped()
            .get(name="crashy")
            .state_reason.startswith("cannot start:")
        ),
        what="the crash loop named",
        timeout=60,
    )
    login("bob")
    status = cli("status", "crashy")
    assert status.code == 0 and "1 worker keeps crashing (exit code 1" in status.out, status
