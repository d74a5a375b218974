"""Ray's own client through the product's Ray dashboard proxy, on a real stack: the web
server as ``make run`` starts it (uvicorn serving the ASGI application, a process of its
own on the test database) or as the production Deployment runs it (gunicorn's uvicorn
workers), kubesim over HTTP and a real Celery worker.

The client is Ray's, pinned in requirements-dev.txt: ``JobSubmissionClient`` in this
process (its ``tail_job_logs`` is the WebSocket path) and the ``ray job`` command line as
a subprocess, both pointed at the API route with a token, as the product's docs say.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from aiohttp import WSServerHandshakeError
from django.conf import settings as django_settings
from django.test import Client
from knox.models import AuthToken
from ray.job_submission import JobStatus, JobSubmissionClient
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from benchmarks.support import Processes, free_port, production_env, wait_http
from clusters.models import ClusterRequest
from scripts.run import web_command
from tests.clusters.engine.conftest import engine_worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[3]
RAY = str(Path(sys.executable).with_name("ray"))
ROUTE = "/api/v1/tenants/acme/clusters/bob-live/ray"
# What kubesim's simulated driver does (simulator knobs in the job's metadata).
QUICK = {"kubesim.io/job-run-seconds": "3", "kubesim.io/job-pending-seconds": "0.5"}


def deployment_command(port: int) -> list[str]:
    """The web container's command of deploy/base/web.yaml, on loopback with one worker."""
    docs = yaml.safe_load_all((ROOT / "deploy" / "base" / "web.yaml").read_text())
    (deployment,) = [d for d in docs if d and d["kind"] == "Deployment"]
    containers = deployment["spec"]["template"]["spec"]["containers"]
    (command,) = [c["command"] for c in containers if c["name"] == "web"]
    swapped = {"--bind": f"--bind=127.0.0.1:{port}", "--workers": "--workers=1"}
    return [sys.executable, "-m", *(swapped.get(arg.split("=")[0], arg) for arg in command)]


@pytest.fixture(params=["make run"])
def web(request: Any, live_cluster: ClusterRequest, tmp_path: Path, settings: Any) -> Iterator[str]:
    """The product's URL: the web server as make run starts it (or, parametrized
    ``deploy``, as the production Deployment does), and a worker, on the test's
    database and kubesim."""
    db = django_settings.DATABASES["default"]
    database_url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    port = free_port()
    env = production_env(
        DATABASE_URL=database_url,
        KUBECONFIG=django_settings.KUBECONFIG,
        GANGWAY_VAR_DIR=str(tmp_path),
        LOG_LEVEL="INFO",
    )
    # The test's sign-ins (sessions made here) must hold there.
    settings.SECRET_KEY = env["SECRET_KEY"]
    processes = Processes(tmp_path)
    with engine_worker(tmp_path):
        command = deployment_command(port) if request.param == "deploy" else web_command(port)
        processes.start("web", command, env)
        try:
            wait_http(f"http://127.0.0.1:{port}/healthz", timeout=60)
            yield f"http://127.0.0.1:{port}"
        finally:
            processes.stop()
            if os.environ.get("SHOW_WEB_LOG"):
                print((tmp_path / "web.log").read_text()[-5000:])


def _token(user: Any) -> str:
    return AuthToken.objects.create(user=user)[1]


def _client(web: str, user: Any) -> JobSubmissionClient:
    return JobSubmissionClient(f"{web}{ROUTE}", headers={"Authorization": f"Token {_token(user)}"})


def _tail(client: JobSubmissionClient, job_id: str) -> list[str]:
    """What ``tail_job_logs`` yields until it ends, on an event loop of its own thread
    (the browser tests' Playwright may hold this thread's)."""

    async def follow() -> list[str]:
        return [chunk async for chunk in client.tail_job_logs(job_id)]

    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, follow()).result()


def _ray(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RAY, "job", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore", "NO_COLOR": "1"},
    )


@pytest.mark.parametrize("web", ["make run", "deploy"], indirect=True)
def test_the_jobs_sdk_submits_follows_stops_and_deletes_through_the_proxy(
    web: str, bob: Any, kubesim: Any
) -> None:
    client = _client(web, bob)
    job_id = client.submit_job(entrypoint="python train.py", metadata=QUICK)
    assert client.get_job_status(job_id) in (JobStatus.PENDING, JobStatus.RUNNING)

    chunks = _tail(client, job_id)  # the WebSocket: returns when the job has ended
    followed = "".join(chunks)
    assert "Connected to Ray cluster" in followed
    assert "[python train.py] step 2: running" in followed
    assert client.get_job_status(job_id) == JobStatus.SUCCEEDED
    assert client.get_job_logs(job_id) == followed  # the tail missed nothing
    assert job_id in [job.submission_id for job in client.list_jobs()]
    assert client.delete_job(job_id) is True

    long = client.submit_job(
        entrypoint="python serve.py", metadata={**QUICK, "kubesim.io/job-run-seconds": "600"}
    )
    wait_for(lambda: client.get_job_status(long) == JobStatus.RUNNING, timeout=30, what="running")
    assert client.stop_job(long) is True
    stopped = "".join(_tail(client, long))  # a stopped job's tail ends too
    assert "Connected to Ray cluster" in stopped
    assert client.get_job_status(long) == JobStatus.STOPPED
    info = client.get_job_info(long)
    assert info.status == JobStatus.STOPPED and info.entrypoint == "python serve.py"

    # The tail was relayed through the Kubernetes API's service proxy, as an upgrade,
    # without the product's token.
    tails = [r for r in kubesim.proxy_requests() if r["path"].endswith("/logs/tail")]
    assert tails and all(r["status"] == 101 for r in tails)
    assert all("Token" not in json.dumps(r) for r in tails)


def test_the_log_tail_is_refused_and_allowed_as_the_http_route_is(
    web: str, bob: Any, vera: Any, charlie: Any, kubesim: Any
) -> None:
    job_id = _client(web, bob).submit_job(entrypoint="python a.py", metadata=QUICK)
    revoked = _client(web, bob)
    AuthToken.objects.filter(user=bob).delete()
    with pytest.raises(WSServerHandshakeError) as unauthenticated:
        _tail(revoked, job_id)
    assert unauthenticated.value.status == 401
    # Ray's client checks the cluster's version when it is made, which charlie's token
    # cannot pass (404): his token is put in a client made with bob's.
    elsewhere = _client(web, bob)
    elsewhere._headers["Authorization"] = f"Token {_token(charlie)}"
    with pytest.raises(WSServerHandshakeError) as not_found:
        _tail(elsewhere, job_id)  # another tenant's cluster
    assert not_found.value.status == 404
    assert not [r for r in kubesim.proxy_requests() if r["path"].endswith("/logs/tail")]
    with pytest.raises(WSServerHandshakeError) as unknown:
        _tail(_client(web, bob), "raysubmit_nosuchjob")  # Ray's own 404, relayed
    assert unknown.value.status == 404
    # A viewer may follow a job's logs, as they may read them.
    assert "step 2: running" in "".join(_tail(_client(web, vera), job_id))


def test_the_jobs_sdk_works_with_the_token_sent_as_a_bearer_token(
    web: str, bob: Any, kubesim: Any
) -> None:
    bearer = {"Authorization": f"Bearer {_token(bob)}"}
    client = JobSubmissionClient(f"{web}{ROUTE}", headers=bearer)
    job_id = client.submit_job(entrypoint="python train.py", metadata=QUICK)
    assert job_id in [job.submission_id for job in client.list_jobs()]
    assert "Connected to Ray cluster" in "".join(_tail(client, job_id))
    # A wrong bearer value is the API's 401, as a wrong Token value is.
    answers = [
        requests.get(f"{web}{ROUTE}/api/version", headers={"Authorization": value}, timeout=30)
        for value in (f"Bearer {'0' * 64}", f"Token {'0' * 64}", "Bearer not-a-token")
    ]
    assert [answer.status_code for answer in answers] == [401, 401, 401]
    assert len({answer.content for answer in answers}) == 1, [a.content for a in answers]


def test_the_ray_job_cli_submits_a_working_dir_and_follows_its_logs(
    web: str, bob: Any, kubesim: Any, tmp_path: Path
) -> None:
    address = ["--address", f"{web}{ROUTE}"]
    headers = ["--headers", json.dumps({"Authorization": f"Token {_token(bob)}"})]
    project = tmp_path / "project"
    project.mkdir()
    (project / "x.py").write_text("print('hello from x')\n")

    submitted = _ray(
        "submit",
        *address,
        *headers,
        "--working-dir",
        str(project),
        "--metadata-json",
        json.dumps(QUICK),
        "--",
        "python",
        "x.py",
        cwd=tmp_path,
    )
    output = submitted.stdout + submitted.stderr
    assert submitted.returncode == 0, output
    assert "submitted successfully" in output
    assert "[python x.py] step 2: running" in output  # followed to the end
    assert "succeeded" in output
    uploads = [r for r in kubesim.proxy_requests() if r["path"].startswith("/api/packages/")]
    assert [r["method"] for r in uploads] == ["GET", "PUT"], uploads
    assert uploads[1]["status"] == 200
    package = uploads[1]["path"].rsplit("/", 1)[1]
    assert package.startswith("_ray_pkg_") and package.endswith(".zip")

    client = _client(web, bob)
    (job,) = [j for j in client.list_jobs() if j.entrypoint == "python x.py"]
    assert job.status == JobStatus.SUCCEEDED
    assert job.runtime_env["working_dir"] == f"gcs://{package}"

    listed = _ray("list", *address, *headers, cwd=tmp_path)
    assert listed.returncode == 0 and job.submission_id in listed.stdout, listed
    followed = _ray("logs", "--follow", job.submission_id, *address, *headers, cwd=tmp_path)
    assert followed.returncode == 0, followed.stderr
    assert "[python x.py] step 2: running" in followed.stdout


def test_the_browser_route_takes_a_websocket_from_a_signed_in_page_of_the_same_origin(
    web: str, bob: Any
) -> None:
    job_id = _client(web, bob).submit_job(entrypoint="python b.py", metadata=QUICK)
    browser = Client()
    browser.force_login(bob)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    url = f"{web.replace('http', 'ws', 1)}/t/acme/clusters/bob-live/ray/api/jobs/{job_id}/logs/tail"

    def follow(**headers: str) -> str:
        with ws_connect(url, additional_headers=headers, open_timeout=10, proxy=None) as ws:
            return "".join(str(message) for message in ws)

    assert "[python b.py] step 2: running" in follow(Cookie=cookie, Origin=web)

    # Refusals, as a browser meets them (not following the sign-in redirect).
    def refused(**headers: str) -> requests.Response:
        upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13"}
        key = {"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
        return requests.get(
            url.replace("ws", "http", 1),
            headers={**upgrade, **key, **headers},
            allow_redirects=False,
            timeout=10,
        )

    assert refused(Cookie=cookie, Origin="https://elsewhere.example").status_code == 403
    signed_out = refused(Origin=web)
    assert signed_out.status_code == 302 and signed_out.headers["Location"].startswith("/login/")
    with pytest.raises(InvalidStatus) as not_a_websocket_route:
        ws_connect(f"{web.replace('http', 'ws', 1)}/api/v1/auth/token/", proxy=None)
    assert not_a_websocket_route.value.response.status_code == 404
