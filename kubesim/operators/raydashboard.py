"""The Ray dashboard of a simulated Ray head, as the API server's service proxy reaches it
(``serviceproxy.py``): the HTTP routes of Ray's dashboard head that a control plane uses,
answered from the head's job table (``rayruntime.py``) in Ray's wire format, so that a
client written against real Ray works unchanged.

Routes are matched as aiohttp matches them in Ray's ``job_head.py``, ``snapshot_head.py``
and health module; kubesim/README.md (*The Ray dashboard*) lists each route and its answers.
Times come from the cluster clock. No other dashboard module (nodes, actors, metrics).
"""

from __future__ import annotations

import hashlib
import html
import json
import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from kubesim.operators import driverlogs, raydemand, rayserve_api
from kubesim.operators.rayruntime import RC, TERMINAL, DriverRun
from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

DASHBOARD_PORT = 8265
GCS_PORT = 6379
CLIENT_PORT = 10001
AGENT_HTTP_PORT = 52365
DEFAULT_RAY_VERSION = "2.49.2"
# The job API's version (ray/dashboard/modules/version.py) that Ray 2.4x serves.
JOBS_API_VERSION = "4"
JSON = "application/json; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
HTML = "text/html; charset=utf-8"
SITE = "/home/ray/anaconda3/lib/python3.11/site-packages/ray/dashboard/modules/job"
SUBMIT_FIELDS = {
    "entrypoint": (str,),
    "submission_id": (str,),
    "job_id": (str,),
    "runtime_env": (dict,),
    "metadata": (dict,),
    "entrypoint_num_cpus": (int, float),
    "entrypoint_num_gpus": (int, float),
    "entrypoint_memory": (int,),
    "entrypoint_resources": (dict,),
    "entrypoint_label_selector": (dict,),
}
# Ray's generate_job_id: no look-alike characters.
_ID_CHARS = "".join(sorted(set(string.ascii_letters + string.digits) - set("IloO0")))


@dataclass
class Reply:
    """One HTTP answer of the dashboard."""

    status: int
    content_type: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    # For a WebSocket taken (status 101): what to send, ``server.py`` polls it.
    tail: Callable[[int], tuple[str, bool] | None] | None = None


def _json(obj: Any, status: int = 200) -> Reply:
    return Reply(status, JSON, json.dumps(obj).encode())


def _text(text: str, status: int) -> Reply:
    return Reply(status, TEXT, text.encode())


def _traceback(frames: list[tuple[str, str]], error: str) -> str:
    """A Python traceback ending in ``error`` (as Ray answers with ``format_exc()``)."""
    lines = ["Traceback (most recent call last):"]
    for n, (where, func) in enumerate(frames):
        lines.append(f'  File "{SITE}/{where}", line {100 + 37 * n}, in {func}')
    return "\n".join([*lines, error]) + "\n"


def ray_ports(rc: Obj | None) -> dict[str, int]:
    """The head's ports (dashboard, GCS, Ray client) from ``rayStartParams``."""
    params = get_path(rc, "spec", "headGroupSpec", "rayStartParams", default={}) or {}

    def port(key: str, default: int) -> int:
        try:
            return int(params.get(key, default))
        except (TypeError, ValueError):
            return default

    return {
        "dashboard": port("dashboard-port", DASHBOARD_PORT),
        "gcs": port("port", GCS_PORT),
        "client": port("ray-client-server-port", CLIENT_PORT),
    }


def ray_version(pod: Obj) -> str:
    """The Ray version of the head's image tag (``rayproject/ray:2.49.2-py311-gpu``)."""
    image = str((get_path(pod, "spec", "containers", default=[{}]) or [{}])[0].get("image", ""))
    found = re.search(r":(\d+\.\d+\.\d+)", image)
    return found.group(1) if found else DEFAULT_RAY_VERSION


class Dashboard:
    """The dashboard of one head pod, for one request (read with the cluster lock held)."""

    def __init__(self, cluster: ClusterView, rc: Obj | None, pod: Obj) -> None:
        self.cluster = cluster
        self.pod = pod
        self.ns = pod["metadata"]["namespace"]
        self.name = (pod["metadata"].get("labels") or {}).get("ray.io/cluster", "")
        self.rc = rc
        self.ip = str(get_path(pod, "status", "podIP", default="127.0.0.1"))
        self.node_id = hashlib.sha224(pod["metadata"]["uid"].encode()).hexdigest()
        self.now = cluster.clock.time()
        self.runtime = cluster.rayruntime

    # -- reads --------------------------------------------------------------------------

    def table(self) -> dict[str, DriverRun]:
        """The head's job table as the job API sees it (deleted jobs left out)."""
        table = self.runtime.heads.get((self.ns, self.name), {})
        return {k: run for k, run in table.items() if not run.deleted}

    def find(self, ident: str) -> DriverRun | None:
        """Ray's ``find_job_by_ids``: an interactive driver's job id, a submission's
        driver job id, else a submission id."""
        table = self.table()
        for run in table.values():
            if run.kind == "DRIVER" and run.driver_id == ident:
                return run
        for run in table.values():
            if run.kind == "SUBMISSION" and self._started(run) and run.driver_id == ident:
                return run
        found = table.get(ident)
        return found if found is not None and found.kind == "SUBMISSION" else None

    def _started(self, run: DriverRun) -> bool:
        """The job's driver has started (its supervisor actor runs it)."""
        return (
            self.now >= run.start
            and (run.stopped is None or run.stopped > run.start)
            and not run.runtime_env_failed
        )

    def details(self, run: DriverRun) -> dict[str, Any]:
        """Ray's ``JobDetails`` of one job, fields in the model's order."""
        end = run.end_time(self.now)
        pid = str(4000 + 17 * int.from_bytes(bytes.fromhex(run.driver_id or "00"), "little"))
        driver = {"id": run.driver_id, "node_ip_address": self.ip, "pid": pid}
        if run.kind == "DRIVER":
            return {
                "type": "DRIVER",
                "job_id": run.driver_id,
                "submission_id": None,
                "driver_info": driver,
                "status": "RUNNING" if end is None else "SUCCEEDED",
                "entrypoint": run.entrypoint,
                "message": None,
                "error_type": None,
                "start_time": int(run.start * 1000),
                # The GCS job table's end_time is 0 while the driver lives.
                "end_time": 0 if end is None else int(end * 1000),
                "metadata": run.metadata or {},
                "runtime_env": run.runtime_env or {},
                "driver_agent_http_address": None,
                "driver_node_id": None,
                "driver_exit_code": None,
            }
        status = run.status(self.now)
        started = self._started(run)
        exit_code = {"SUCCEEDED": 0, "FAILED": 1}.get(status)
        error_type = None
        if status == "FAILED":
            error_type = (
                "RUNTIME_ENV_SETUP_FAILURE"
                if run.runtime_env_failed
                else "JOB_ENTRYPOINT_COMMAND_ERROR"
            )
        return {
            "type": "SUBMISSION",
            "job_id": run.driver_id if started else None,
            "submission_id": run.job_id,
            "driver_info": driver if started else None,
            "status": status,
            "entrypoint": run.entrypoint,
            "message": run.message_at(self.now),
            "error_type": error_type,
            "start_time": int(run.submitted * 1000),
            "end_time": None if end is None else int(end * 1000),
            "metadata": run.metadata,
            "runtime_env": run.runtime_env,
            "driver_agent_http_address": (
                f"http://{self.ip}:{AGENT_HTTP_PORT}" if started else None
            ),
            "driver_node_id": self.node_id if started else None,
            "driver_exit_code": exit_code if started else None,
        }

    def jobs(self) -> list[dict[str, Any]]:
        """``GET /api/jobs/``: submissions, then interactive drivers."""
        runs = list(self.table().values())
        return [self.details(r) for r in runs if r.kind == "SUBMISSION"] + [
            self.details(r) for r in runs if r.kind == "DRIVER"
        ]

    def activities(self) -> dict[str, Any]:
        """``GET /api/component_activities``."""
        active, last = self.runtime.activity(self.ns, self.name, self.now)
        return {
            "driver": {
                "is_active": "ACTIVE" if active else "INACTIVE",
                "reason": f"Number of active drivers: {active}" if active else None,
                "timestamp": self.now,
                "last_activity_at": last,
            }
        }

    def version(self) -> dict[str, str]:
        """``GET /api/version``."""
        ray = ray_version(self.pod)
        started = get_path(self.pod, "status", "startTime", default="") or ""
        stamp = re.sub(r"[-:TZ]", "", started) or "19700101000000"
        session = (
            f"session_{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}_{stamp[8:10]}-{stamp[10:12]}-"
            f"{stamp[12:14]}_000000_1"
        )
        return {
            "version": JOBS_API_VERSION,
            "ray_version": ray,
            "ray_commit": hashlib.sha1(f"ray-{ray}".encode()).hexdigest(),
            "session_name": session,
        }

    def logs(self, run: DriverRun) -> str:
        """The driver's output so far (its job log)."""
        if not self._started(run):
            return ""
        address = f"http://{self.ip}:{ray_ports(self.rc)['dashboard']}"
        lines = [text for _, text in driverlogs.driver_output(run, address, run.start, self.now)]
        if run.status(self.now) == "FAILED" and "\n" in run.message:
            lines += run.message.split("\n", 1)[1].splitlines()
        return "".join(f"{line}\n" for line in lines)

    def tail(self, ident: str, sent: int) -> tuple[str, bool] | None:
        """One look for ``/logs/tail``: the job's output after its first ``sent``
        characters and whether the job has ended; None once the job is gone."""
        run = self.find(ident)
        if run is None:
            return None
        return self.logs(run)[sent:], run.status(self.now) in TERMINAL

    def package(self, method: str, protocol: str, name: str, body: bytes) -> Reply:
        """``GET`` / ``PUT /api/packages/{protocol}/{name}``."""
        if protocol != "gcs":
            return _text(
                _traceback(
                    [("job_head.py", "get_package"), ("packaging.py", "parse_uri")],
                    f"ValueError: '{protocol}' is not a valid Protocol",
                ),
                500,
            )
        uri = f"{protocol}://{name}"
        head = (self.ns, self.name)
        if method == "PUT":
            self.runtime.store_package(head, uri, len(body))
            return Reply(200, "application/octet-stream", b"")
        if not self.runtime.has_package(head, uri):
            return _text(f"Package {uri} does not exist", 404)
        return Reply(200, "application/octet-stream", b"")

    # -- writes -------------------------------------------------------------------------

    def submit(self, body: bytes) -> Reply:
        """``POST /api/jobs/``."""
        try:
            req = json.loads(body)
        except ValueError:
            req = None
        if not isinstance(req, dict):
            # aiohttp's answer to the handler's uncaught error (an empty or non-JSON body
            # fails ``req.json()``, a JSON non-object Ray's stripping of None values).
            return _text("500 Internal Server Error\n\nServer got itself in trouble", 500)
        req = {k: v for k, v in req.items() if v is not None}
        problem = _check_submit(req)
        if problem is not None:
            return _text(
                _traceback(
                    [
                        ("utils.py", "parse_and_validate_request"),
                        ("common.py", "validate_request_type"),
                    ],
                    problem,
                ),
                400,
            )
        sid = req.get("submission_id") or req.get("job_id") or _generate_job_id()
        asked = (
            req.get("entrypoint_num_cpus", 0) > 0
            or req.get("entrypoint_num_gpus", 0) > 0
            or req.get("entrypoint_memory", 0) > 0
            or req.get("entrypoint_resources") not in (None, {})
        )
        metadata = req.get("metadata")
        run = self.runtime.submit_request(
            self.ns,
            self.name,
            str(sid),
            req["entrypoint"],
            {str(k): str(v) for k, v in metadata.items()} if metadata is not None else None,
            req.get("runtime_env"),
            asked,
            raydemand.entrypoint_bundle(
                req.get("entrypoint_num_cpus"),
                req.get("entrypoint_num_gpus"),
                req.get("entrypoint_memory"),
                req.get("entrypoint_resources"),
            ),
        )
        if run is None:
            inner = _traceback(
                [("job_agent.py", "submit_job"), ("job_manager.py", "submit_job")],
                f"ValueError: Job with submission_id {sid} already exists. "
                "Please use a different submission_id.",
            )
            return _text(
                _traceback(
                    [("job_head.py", "submit_job"), ("job_head.py", "submit_job_internal")],
                    f"RuntimeError: Request failed with status code 400: {inner}.",
                ),
                500,
            )
        return _json({"job_id": run.job_id, "submission_id": run.job_id})

    def stop(self, run: DriverRun) -> Reply:
        """``POST /api/jobs/{id}/stop``."""
        if run.kind != "SUBMISSION":
            return _text("Can only stop submission type jobs", 400)
        running = run.end_time(self.now) is None
        if running:
            self.runtime.stop(self.ns, self.name, run.job_id)
        return _json({"stopped": running})

    def delete(self, run: DriverRun) -> Reply:
        """``DELETE /api/jobs/{id}``."""
        if run.kind != "SUBMISSION":
            return _text("Can only delete submission type jobs", 400)
        status = run.status(self.now)
        if status not in TERMINAL:
            inner = _traceback(
                [("job_agent.py", "delete_job"), ("job_manager.py", "delete_job")],
                f"RuntimeError: Attempted to delete job '{run.job_id}', but it is in a "
                f"non-terminal state {status}.",
            )
            return _text(
                _traceback(
                    [("job_head.py", "delete_job"), ("job_head.py", "delete_job_internal")],
                    f"RuntimeError: Request failed with status code 500: {inner}.",
                ),
                500,
            )
        self.runtime.delete(self.ns, self.name, run.job_id)
        return _json({"deleted": True})

    # -- the page -----------------------------------------------------------------------

    def index(self) -> Reply:
        """``GET /``: the page a browser sees through the proxy (relative links only)."""
        esc = html.escape
        rows = []
        for job in self.jobs():
            ident = job["submission_id"] or job["job_id"] or ""
            link = quote(str(ident), safe="")
            logs = f'<a href="api/jobs/{link}/logs">logs</a>' if job["type"] == "SUBMISSION" else ""
            rows.append(
                f'<tr><td><a href="api/jobs/{link}">{esc(str(ident))}</a></td>'
                f"<td>{esc(job['type'])}</td><td>{esc(job['status'])}</td>"
                f"<td><code>{esc(job['entrypoint'])}</code></td><td>{logs}</td></tr>"
            )
        table = "\n".join(rows) or '<tr><td colspan="5">No jobs yet.</td></tr>'
        ray = esc(ray_version(self.pod))
        page = f"""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Ray Dashboard</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:.2em .8em;text-align:left}}</style>
</head>
<body>
<h1>Ray Dashboard</h1>
<p>Cluster <strong>{esc(self.name)}</strong> (namespace {esc(self.ns)}), Ray {ray},
head {esc(self.ip)}.</p>
<p><a href="api/version">version</a> · <a href="api/jobs/">jobs (JSON)</a> ·
<a href="api/component_activities">component activities</a></p>
<h2>Jobs</h2>
<table>
<tr><th>ID</th><th>Type</th><th>Status</th><th>Entrypoint</th><th></th></tr>
{table}
</table>
</body>
</html>
"""
        return Reply(200, HTML, page.encode())

    # -- routing ------------------------------------------------------------------------

    # Named exception to ruff's C901 (max-complexity 12): the dashboard's route table, one
    # branch per route as aiohttp matches them.
    def serve(  # noqa: C901
        self, method: str, path: str, body: bytes, *, upgrade: bool = False
    ) -> Reply:
        """Answer one request (``path`` decoded, without the query; ``upgrade``: it asks
        for a WebSocket, answered with a :class:`Reply` whose ``tail`` server.py streams)."""
        if path == "/api/serve/applications/":
            if method not in ("GET", "PUT", "DELETE"):
                reply = _text("405: Method Not Allowed", 405)
                reply.headers["Allow"] = "DELETE,GET,HEAD,PUT"
                return reply
            return Reply(*rayserve_api.serve_api(self.cluster, self.ns, self.name, method, body))
        fixed: dict[str, tuple[str, ...]] = {
            "/": ("GET",),
            "/api/version": ("GET",),
            "/api/gcs_healthz": ("GET",),
            "/api/jobs/": ("GET", "POST"),
            "/api/component_activities": ("GET",),
        }
        found = re.fullmatch(r"/api/jobs/([^/]+)(/stop|/logs|/logs/tail)?", path)
        package = re.fullmatch(r"/api/packages/([^/]+)/([^/]+)", path)
        if package is not None:
            if method not in ("GET", "PUT"):
                reply = _text("405: Method Not Allowed", 405)
                reply.headers["Allow"] = "GET,HEAD,PUT"
                return reply
            return self.package(method, package.group(1), package.group(2), body)
        if path in fixed:
            allowed = fixed[path]
        elif found is not None:
            sub = found.group(2) or ""
            allowed = {"": ("GET", "DELETE"), "/stop": ("POST",)}.get(sub, ("GET",))
        else:
            return _text("404: Not Found", 404)
        if method not in allowed:
            reply = _text("405: Method Not Allowed", 405)
            # aiohttp serves HEAD wherever it serves GET.
            methods = {*allowed, "HEAD"} if "GET" in allowed else set(allowed)
            reply.headers["Allow"] = ",".join(sorted(methods))
            return reply
        if path == "/":
            return self.index()
        if path == "/api/version":
            return _json(self.version())
        if path == "/api/gcs_healthz":
            return Reply(200, "application/text; charset=utf-8", b"success")
        if path == "/api/component_activities":
            return _json(self.activities())
        if path == "/api/jobs/":
            return _json(self.jobs()) if method == "GET" else self.submit(body)
        assert found is not None
        ident, sub = found.group(1), found.group(2) or ""
        run = self.find(ident)
        if run is None:
            return _text(f"Job {ident} does not exist", 404)
        if sub == "/stop":
            return self.stop(run)
        if sub == "/logs":
            if run.kind != "SUBMISSION":
                return _text("Can only get logs of submission type jobs", 400)
            return _json({"logs": self.logs(run)})
        if sub == "/logs/tail":
            if run.kind != "SUBMISSION":
                return _text("Can only get logs of submission type jobs", 400)
            if not upgrade:
                return _text(
                    'No WebSocket UPGRADE hdr: None\n Can "Upgrade" only to "WebSocket".', 400
                )
            return Reply(101, TEXT, b"", tail=log_tail(self.cluster, self.ns, self.name, ident))
        if method == "DELETE":
            return self.delete(run)
        return _json(self.details(run))


def log_tail(
    cluster: ClusterView, ns: str, name: str, ident: str
) -> Callable[[int], tuple[str, bool] | None]:
    """What a log tail's WebSocket polls: a fresh look at job ``ident`` of the head of
    RayCluster ``ns/name`` each time (under the cluster's lock); None once the head or
    the job is gone."""

    def look(sent: int) -> tuple[str, bool] | None:
        with cluster.lock:
            rc = cluster.store.get(RC, ns, name)
            head = get_path(rc, "status", "head", "podName")
            pod = cluster.store.get("pods", ns, head) if head else None
            if rc is None or pod is None:
                return None
            return Dashboard(cluster, rc, pod).tail(ident, sent)

    return look


def _check_submit(req: dict[str, Any]) -> str | None:
    """Ray's ``JobSubmitRequest(**json)``: the TypeError it raises, if any."""
    for key in req:
        if key not in SUBMIT_FIELDS:
            return (
                f"TypeError: JobSubmitRequest.__init__() got an unexpected keyword argument '{key}'"
            )
    if "entrypoint" not in req:
        return (
            "TypeError: JobSubmitRequest.__init__() missing 1 required positional "
            "argument: 'entrypoint'"
        )
    for key, types in SUBMIT_FIELDS.items():
        value = req.get(key)
        if value is None:
            continue
        if not isinstance(value, types):
            kind = {str: "a string", dict: "a dict", int: "an integer"}[types[0]]
            if types == (int, float):
                kind = "a number"
            return f"TypeError: {key} must be {kind}, got {type(value)!r}"
        if key in ("metadata", "entrypoint_resources", "runtime_env") and any(
            not isinstance(k, str) for k in value
        ):
            return f"TypeError: {key} keys must be strings, got <class 'int'>"
        if key == "metadata" and any(not isinstance(v, str) for v in value.values()):
            bad = next(v for v in value.values() if not isinstance(v, str))
            return f"TypeError: metadata values must be strings, got {type(bad)!r}"
    return None


def _generate_job_id() -> str:
    """Ray's ``raysubmit_<16 characters>``."""
    return "raysubmit_" + "".join(random.SystemRandom().choices(_ID_CHARS, k=16))


__all__ = ["Dashboard", "Reply", "ray_ports", "ray_version"]
