"""The Ray dashboard of a simulated head (``kubesim/operators/raydashboard.py``), reached
through the service proxy over real HTTP: the job API on the head's job table (jobs of the
REST API and of RayJobs), component activities on the simulated clock, the interactive
driver knob, the HTML page, the head's log, the log tail's WebSocket (carried by the
service proxy as an upgrade) and the package uploads of ``--working-dir``."""

from __future__ import annotations

import re
from typing import Any

import pytest
import requests
from kubernetes import client
from kubesim_helpers import raycluster, rayjob
from websockets.exceptions import ConnectionClosedOK, InvalidStatus
from websockets.sync.client import connect as ws_connect

from kubesim import KubeSim
from kubesim.clock import ManualClock
from tests.kubesim import manual_clock

# The simulator on a clock moved by hand (overrides conftest's real-clock ``sim``).
clock = manual_clock.clock
sim = manual_clock.sim
advance = manual_clock.advance

NS = "default"
JOB_DETAILS_KEYS = [
    "type",
    "job_id",
    "submission_id",
    "driver_info",
    "status",
    "entrypoint",
    "message",
    "error_type",
    "start_time",
    "end_time",
    "metadata",
    "runtime_env",
    "driver_agent_http_address",
    "driver_node_id",
    "driver_exit_code",
]


class Ray:
    """The dashboard of RayCluster ``name`` through the proxy."""

    def __init__(self, sim: KubeSim, name: str = "rc") -> None:
        self.base = f"{sim.url}/api/v1/namespaces/{NS}/services/{name}-head-svc:dashboard/proxy"

    def get(self, path: str) -> requests.Response:
        return requests.get(f"{self.base}/{path}", timeout=5)

    def post(self, path: str, body: Any = None) -> requests.Response:
        return requests.post(f"{self.base}/{path}", json=body, timeout=5)

    def delete(self, path: str) -> requests.Response:
        return requests.delete(f"{self.base}/{path}", timeout=5)

    def activity(self) -> dict[str, Any]:
        r = self.get("api/component_activities")
        assert r.headers["Content-Type"] == "application/json; charset=utf-8"
        driver: dict[str, Any] = r.json()["driver"]
        return driver


@pytest.fixture
def ray(sim: KubeSim, custom: client.CustomObjectsApi) -> Ray:
    """A ready RayCluster ``rc`` and its dashboard."""
    body = raycluster("rc")
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = (
        "rayproject/ray:2.49.2-py311-gpu"
    )
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", body)
    return Ray(sim)


def test_version_and_page(ray: Ray, sim: KubeSim) -> None:
    body = ray.get("api/version").json()
    assert body["ray_version"] == "2.49.2"
    assert body["version"] == "4"
    assert re.fullmatch(r"[0-9a-f]{40}", body["ray_commit"])
    assert ray.get("api/gcs_healthz").text == "success"
    ray.post("api/jobs/", {"entrypoint": "python a.py", "submission_id": "job-<1>"})
    r = ray.get("")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    page = r.text
    assert "<title>Ray Dashboard</title>" in page
    assert "rc" in page and "2.49.2" in page
    assert "job-&lt;1&gt;" in page  # escaped
    links = re.findall(r'(?:href|src)="([^"]*)"', page)
    assert 'href="api/jobs/job-%3C1%3E"' in page
    assert links and all(not link.startswith(("/", "http:", "https:", "//")) for link in links)
    # Relative links resolve under the proxy path.
    assert ray.get("api/jobs/job-%3C1%3E").json()["submission_id"] == "job-<1>"


def test_submit_list_get_stop_delete_logs(ray: Ray, sim: KubeSim, clock: ManualClock) -> None:
    r = ray.post(
        "api/jobs/",
        {
            "entrypoint": "python train.py",
            "submission_id": "s1",
            "metadata": {"owner": "alice", "kubesim.io/job-run-seconds": "10"},
            "runtime_env": {"pip": ["torch"]},
            "entrypoint_num_gpus": 1,
        },
    )
    assert (r.status_code, r.json()) == (200, {"job_id": "s1", "submission_id": "s1"})
    job = ray.get("api/jobs/s1").json()
    assert list(job) == JOB_DETAILS_KEYS
    assert job["type"] == "SUBMISSION" and job["status"] == "PENDING"
    assert job["message"] == (
        "Job has not started yet. It may be waiting for resources (CPUs, GPUs, memory, custom "
        "resources) to become available. It may be waiting for the runtime environment to be "
        "set up."
    )
    assert job["job_id"] is None and job["driver_info"] is None and job["end_time"] is None
    assert job["metadata"] == {"owner": "alice", "kubesim.io/job-run-seconds": "10"}
    assert job["runtime_env"] == {"pip": ["torch"]}
    assert job["start_time"] == int(clock.time() * 1000)
    assert ray.get("api/jobs/s1/logs").json() == {"logs": ""}

    advance(sim, clock, 2)  # 1 s pending, then running
    job = ray.get("api/jobs/s1").json()
    assert job["status"] == "RUNNING" and job["message"] == "Job is currently running."
    driver_id = job["job_id"]
    assert re.fullmatch(r"[0-9a-f]{8}", driver_id)
    assert job["driver_info"]["id"] == driver_id
    assert job["driver_agent_http_address"].endswith(":52365")
    assert ray.get(f"api/jobs/{driver_id}").json()["submission_id"] == "s1"  # by driver id
    logs = ray.get("api/jobs/s1/logs").json()["logs"]
    assert "Connected to Ray cluster." in logs
    assert logs.splitlines()[-1] == "[python train.py] step 1: running (1s elapsed)"

    # Another job with Ray's generated id, and the list of both.
    r = ray.post("api/jobs/", {"entrypoint": "echo hi"})
    other = r.json()["submission_id"]
    assert re.fullmatch(r"raysubmit_[A-Za-z1-9]{16}", other)
    listed = ray.get("api/jobs/").json()
    assert [j["submission_id"] for j in listed] == ["s1", other]
    assert listed[1]["metadata"] is None and listed[1]["runtime_env"] is None
    assert listed[1]["message"] == "Job has not started yet."
    assert sim.ray_jobs(NS, "rc") == listed

    # Deleting a running job is the job manager's RuntimeError, through the head: 500.
    r = ray.delete("api/jobs/s1")
    assert r.status_code == 500
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert (
        "RuntimeError: Attempted to delete job 's1', but it is in a non-terminal state RUNNING."
        in r.text
    )
    assert ray.post("api/jobs/s1/stop").json() == {"stopped": True}
    job = ray.get("api/jobs/s1").json()
    assert (job["status"], job["message"]) == ("STOPPED", "Job was intentionally stopped.")
    assert job["end_time"] == int(clock.time() * 1000)
    assert ray.post("api/jobs/s1/stop").json() == {"stopped": False}
    assert ray.delete("api/jobs/s1").json() == {"deleted": True}
    assert ray.get("api/jobs/s1").status_code == 404
    assert [j["submission_id"] for j in ray.get("api/jobs/").json()] == [other]

    for path in ("api/jobs/nope", "api/jobs/nope/logs"):
        r = ray.get(path)
        assert (r.status_code, r.text) == (404, "Job nope does not exist")
    assert ray.post("api/jobs/nope/stop").status_code == 404
    assert ray.delete("api/jobs/nope").status_code == 404
    r = ray.delete("api/version")
    assert (r.status_code, r.text) == (405, "405: Method Not Allowed")


def test_submit_refusals(ray: Ray) -> None:
    assert ray.post("api/jobs/", {"entrypoint": "x", "submission_id": "dup"}).ok
    r = ray.post("api/jobs/", {"entrypoint": "y", "submission_id": "dup"})
    # The agent's 400 wrapped by the head into a 500, as Ray's job head answers it.
    assert r.status_code == 500
    assert (
        "ValueError: Job with submission_id dup already exists. "
        "Please use a different submission_id." in r.text
    )
    assert "Request failed with status code 400" in r.text
    r = ray.post("api/jobs/", {"runtime_env": {}})
    assert r.status_code == 400
    assert r.text.rstrip().endswith(
        "TypeError: JobSubmitRequest.__init__() missing 1 required positional argument: "
        "'entrypoint'"
    )
    r = ray.post("api/jobs/", {"entrypoint": "x", "key": "baaaad request"})
    assert r.status_code == 400
    assert "TypeError: JobSubmitRequest.__init__() got an unexpected keyword argument" in r.text
    for bad in (b"", b"{", b"[]"):
        r = requests.post(f"{ray.base}/api/jobs/", data=bad, timeout=5)
        assert (r.status_code, r.text) == (
            500,
            "500 Internal Server Error\n\nServer got itself in trouble",
        )
    r = ray.post("api/jobs/", {"entrypoint": 3})
    assert r.status_code == 400 and "entrypoint must be a string" in r.text
    # job_id is the deprecated name of submission_id.
    assert ray.post("api/jobs/", {"entrypoint": "x", "job_id": "old"}).json()["job_id"] == "old"


def test_knobs_in_metadata_and_failure(ray: Ray, sim: KubeSim, clock: ManualClock) -> None:
    ray.post(
        "api/jobs/",
        {
            "entrypoint": "python bad.py",
            "submission_id": "bad",
            "metadata": {
                "kubesim.io/job-run-seconds": "3",
                "kubesim.io/job-outcome": "failed",
                "kubesim.io/job-message": "ZeroDivisionError: division by zero",
            },
        },
    )
    advance(sim, clock, 5)
    job = ray.get("api/jobs/bad").json()
    assert job["status"] == "FAILED"
    assert job["message"].startswith("Job entrypoint command failed with exit code 1")
    assert job["driver_exit_code"] == 1
    assert job["end_time"] - job["start_time"] == 4000  # 1 s pending + 3 s running
    assert (
        ray.get("api/jobs/bad/logs")
        .json()["logs"]
        .endswith("ZeroDivisionError: division by zero\n")
    )
    assert ray.delete("api/jobs/bad").json() == {"deleted": True}
    # The job API forgets it (its id may be used again), the GCS keeps its driver's end.
    assert ray.get("api/jobs/bad").status_code == 404
    assert ray.activity()["last_activity_at"] == pytest.approx(job["end_time"] / 1000)
    assert ray.post("api/jobs/", {"entrypoint": "x", "submission_id": "bad"}).ok


def test_component_activities_follow_the_drivers(
    ray: Ray, sim: KubeSim, clock: ManualClock
) -> None:
    driver = ray.activity()
    assert driver == {
        "is_active": "INACTIVE",
        "reason": None,
        "timestamp": clock.time(),
        "last_activity_at": None,
    }
    # A job stopped while PENDING never had a driver: no activity.
    ray.post("api/jobs/", {"entrypoint": "python a.py", "submission_id": "early"})
    assert ray.post("api/jobs/early/stop").json() == {"stopped": True}
    advance(sim, clock, 5)
    assert ray.get("api/jobs/early").json()["status"] == "STOPPED"
    assert ray.activity()["last_activity_at"] is None
    ray.post(
        "api/jobs/",
        {"entrypoint": "python a.py", "metadata": {"kubesim.io/job-run-seconds": "600"}},
    )
    assert ray.activity()["is_active"] == "INACTIVE"  # PENDING: no driver yet
    advance(sim, clock, 1)
    driver = ray.activity()
    assert (driver["is_active"], driver["reason"]) == ("ACTIVE", "Number of active drivers: 1")
    assert driver["last_activity_at"] is None
    advance(sim, clock, 600)
    ended = clock.time()
    advance(sim, clock, 3600)  # an idle hour later
    driver = ray.activity()
    assert driver["is_active"] == "INACTIVE" and driver["reason"] is None
    assert driver["last_activity_at"] == pytest.approx(ended)
    assert driver["timestamp"] == pytest.approx(ended + 3600)


def test_interactive_driver_knob(
    ray: Ray, sim: KubeSim, clock: ManualClock, custom: client.CustomObjectsApi
) -> None:
    custom.patch_namespaced_custom_object(
        "ray.io",
        "v1",
        NS,
        "rayclusters",
        "rc",
        {"metadata": {"annotations": {"kubesim.io/ray-driver": "active"}}},
    )
    advance(sim, clock, 120)
    driver = ray.activity()
    assert (driver["is_active"], driver["reason"]) == ("ACTIVE", "Number of active drivers: 1")
    listed = ray.get("api/jobs/").json()
    assert [(j["type"], j["status"], j["end_time"]) for j in listed] == [("DRIVER", "RUNNING", 0)]
    driver_id = listed[0]["job_id"]
    assert ray.get(f"api/jobs/{driver_id}").json()["type"] == "DRIVER"
    r = ray.post(f"api/jobs/{driver_id}/stop")
    assert (r.status_code, r.text) == (400, "Can only stop submission type jobs")
    # Connected and gone at once still counts as activity.
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", raycluster("blip"))
    sim.set_ray_driver(NS, "blip", "active")
    sim.set_ray_driver(NS, "blip", "idle")
    assert Ray(sim, "blip").activity()["last_activity_at"] == clock.time()
    idle_at = clock.time()
    sim.set_ray_driver(NS, "rc", "idle")
    advance(sim, clock, 900)
    driver = ray.activity()
    assert driver["is_active"] == "INACTIVE"
    assert driver["last_activity_at"] == pytest.approx(idle_at)
    job = ray.get(f"api/jobs/{driver_id}").json()
    assert (job["status"], job["end_time"]) == ("SUCCEEDED", int(idle_at * 1000))
    # Active again: a new driver; suspending the cluster loses the head and its history.
    sim.set_ray_driver(NS, "rc", "active")
    assert ray.activity()["reason"] == "Number of active drivers: 1"
    for suspend in (True, False):
        custom.patch_namespaced_custom_object(
            "ray.io", "v1", NS, "rayclusters", "rc", {"spec": {"suspend": suspend}}
        )
        if suspend:
            assert ray.get("api/component_activities").status_code == 503
    # A new head: a new GCS without the old driver's history, and the knob still says active.
    driver = ray.activity()
    assert (driver["is_active"], driver["last_activity_at"]) == ("ACTIVE", None)
    assert [j["type"] for j in ray.get("api/jobs/").json()] == ["DRIVER"]
    with pytest.raises(ValueError):
        sim.set_ray_driver(NS, "rc", "busy")


def test_a_cluster_created_busy_is_active_once_its_head_is_ready(
    sim: KubeSim, custom: client.CustomObjectsApi
) -> None:
    body = raycluster("busy")
    body["metadata"]["annotations"] = {"kubesim.io/ray-driver": "active"}
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", body)
    assert Ray(sim, "busy").activity()["is_active"] == "ACTIVE"


def test_rayjob_jobs_are_listed_and_logged_on_the_head(
    sim: KubeSim, clock: ManualClock, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    custom.create_namespaced_custom_object(
        "ray.io",
        "v1",
        NS,
        "rayjobs",
        rayjob("rj", annotations={"kubesim.io/job-run-seconds": "4"}),
    )
    st = custom.get_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", "rj")["status"]
    ray = Ray(sim, st["rayClusterName"])
    listed = ray.get("api/jobs/").json()
    assert [(j["submission_id"], j["entrypoint"]) for j in listed] == [
        (st["jobId"], "python train.py")
    ]
    assert listed[0]["metadata"] == {} and listed[0]["runtime_env"] == {}
    ray.post("api/jobs/", {"entrypoint": "python eval.py", "submission_id": "rest-1"})
    advance(sim, clock, 2)
    assert ray.activity()["reason"] == "Number of active drivers: 2"
    head = core.list_namespaced_pod(
        NS, label_selector=f"ray.io/cluster={st['rayClusterName']},ray.io/node-type=head"
    ).items[0]
    text = core.read_namespaced_pod_log(head.metadata.name, NS, _preload_content=False).data
    text = text.decode()
    assert "view the dashboard at" in text and f"{head.status.pod_ip}:8265" in text
    assert f"Starting job with submission_id: {st['jobId']}" in text
    assert "Starting job with submission_id: rest-1" in text


def _tail(ray: Ray, job: str) -> Any:
    url = f"{ray.base}/api/jobs/{job}/logs/tail".replace("http://", "ws://", 1)
    return ws_connect(url, open_timeout=5, proxy=None)


def test_logs_tail_is_a_websocket_that_follows_the_driver_and_closes_at_its_end(
    ray: Ray, sim: KubeSim, clock: ManualClock
) -> None:
    ray.post(
        "api/jobs/",
        {
            "entrypoint": "python t.py",
            "submission_id": "t1",
            "metadata": {"kubesim.io/job-run-seconds": "3"},
        },
    )
    # Without the upgrade: aiohttp's refusal of a plain request on a WebSocket route.
    r = ray.get("api/jobs/t1/logs/tail")
    assert r.status_code == 400 and 'Can "Upgrade" only to "WebSocket"' in r.text
    with pytest.raises(InvalidStatus) as unknown:
        _tail(ray, "nope")
    assert unknown.value.response.status_code == 404
    assert unknown.value.response.body == b"Job nope does not exist"

    with _tail(ray, "t1") as ws:
        advance(sim, clock, 1.5)  # pending for 1 s, then the driver connects
        first = ws.recv(timeout=5)
        assert "Connected to Ray cluster." in first
        advance(sim, clock, 1)
        assert ws.recv(timeout=5) == "[python t.py] step 1: running (1s elapsed)\n"
        advance(sim, clock, 5)  # the job ends: the rest, then a normal close
        rest = ws.recv(timeout=5)
        assert rest.endswith("step 2: running (2s elapsed)\n")
        with pytest.raises(ConnectionClosedOK):
            ws.recv(timeout=5)
        assert ws.close_code == 1000
    assert (
        first + "[python t.py] step 1: running (1s elapsed)\n" + rest
        == ray.get("api/jobs/t1/logs").json()["logs"]
    )
    # A job that has ended closes at once, after everything it wrote.
    with _tail(ray, "t1") as ws:
        assert ws.recv(timeout=5) == ray.get("api/jobs/t1/logs").json()["logs"]
        with pytest.raises(ConnectionClosedOK):
            ws.recv(timeout=5)


def test_packages_are_uploaded_and_a_working_dir_needs_its_package(
    ray: Ray, sim: KubeSim, clock: ManualClock
) -> None:
    uri = "gcs://_ray_pkg_0123456789abcdef.zip"
    path = "api/packages/gcs/_ray_pkg_0123456789abcdef.zip"
    r = ray.get(path)
    assert (r.status_code, r.text) == (404, f"Package {uri} does not exist")

    # A job naming a package the head does not have fails setting up its runtime env.
    ray.post(
        "api/jobs/",
        {"entrypoint": "python x.py", "submission_id": "w0", "runtime_env": {"working_dir": uri}},
    )
    advance(sim, clock, 2)
    job = ray.get("api/jobs/w0").json()
    assert job["status"] == "FAILED" and job["error_type"] == "RUNTIME_ENV_SETUP_FAILURE"
    assert job["message"].startswith("runtime_env setup failed: Failed to set up runtime")
    assert uri in job["message"] and job["driver_info"] is None
    with _tail(ray, "w0") as ws, pytest.raises(ConnectionClosedOK):
        ws.recv(timeout=5)  # its driver never ran: nothing to send

    put = requests.put(f"{ray.base}/{path}", data=b"PK\x05\x06" + bytes(18), timeout=5)
    assert (put.status_code, put.text) == (200, "")
    assert ray.get(path).status_code == 200
    ray.post(
        "api/jobs/",
        {"entrypoint": "python x.py", "submission_id": "w1", "runtime_env": {"working_dir": uri}},
    )
    advance(sim, clock, 2)
    job = ray.get("api/jobs/w1").json()
    assert job["status"] == "RUNNING" and job["runtime_env"] == {"working_dir": uri}
    r = ray.get("api/packages/s3/bucket.zip")
    assert r.status_code == 500 and "is not a valid Protocol" in r.text
    assert ray.delete(path).status_code == 405
