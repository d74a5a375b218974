"""``GET /api/v1/namespaces/{ns}/pods/{name}/log``: synthetic container logs.

Containers do not run in kubesim, so their output is made up, plausibly and
deterministically, from the pod and the simulated time: what a Ray head, a worker, a RayJob
submitter (``operators/rayruntime.py``) or any other container would print. Each line carries
the time it was "written", so ``sinceSeconds``/``sinceTime``, ``timestamps`` and ``follow``
behave. A pod whose processes are real (``localproc.py``) shows their output instead. The
options and refusals are the API server's and the kubelet's; kubesim/README.md (*Pod logs*)
lists them and the lines each container prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.errors import ApiError, Cause
from kubesim.operators.driverlogs import Line, driver_lines, driver_output, ray_stamp
from kubesim.store import Obj
from kubesim.util import get_path, parse_time, stamp_nano

if TYPE_CHECKING:
    from kubesim.controller import ClusterView
    from kubesim.operators.rayruntime import SubmitterTrace

GENERIC_PERIOD = 60.0


@dataclass
class LogOptions:
    """The query of a log request, checked as the API server checks ``PodLogOptions``."""

    container: str = ""
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    limit_bytes: int | None = None
    since_seconds: int | None = None
    since_time: float | None = None

    @classmethod
    def parse(cls, name: str, params: dict[str, str]) -> LogOptions:
        """Options from the query string; 400 for a malformed value, 422 for a bad one."""

        def flag(key: str) -> bool:
            return params.get(key, "").lower() in ("true", "1")

        def integer(key: str) -> int | None:
            if key not in params:
                return None
            try:
                return int(params[key])
            except ValueError:
                raise errors.bad_request(
                    f'strconv.ParseInt: parsing "{params[key]}": invalid syntax'
                ) from None

        opts = cls(
            container=params.get("container", ""),
            follow=flag("follow"),
            previous=flag("previous"),
            timestamps=flag("timestamps"),
            tail_lines=integer("tailLines"),
            limit_bytes=integer("limitBytes"),
            since_seconds=integer("sinceSeconds"),
        )
        if params.get("sinceTime"):
            try:
                opts.since_time = parse_time(params["sinceTime"]).timestamp()
            except ValueError:
                raise errors.bad_request(
                    f'parsing time "{params["sinceTime"]}" as "2006-01-02T15:04:05Z07:00": '
                    "cannot parse"
                ) from None
        causes = []
        if opts.tail_lines is not None and opts.tail_lines < 0:
            causes.append(
                Cause("tailLines", "FieldValueInvalid", "must be greater than or equal to 0")
            )
        if opts.limit_bytes is not None and opts.limit_bytes < 1:
            causes.append(Cause("limitBytes", "FieldValueInvalid", "must be greater than 0"))
        if opts.since_seconds is not None and opts.since_seconds < 1:
            causes.append(Cause("sinceSeconds", "FieldValueInvalid", "must be greater than 0"))
        if opts.since_seconds is not None and opts.since_time is not None:
            causes.append(
                Cause(
                    "",
                    "FieldValueForbidden",
                    "at most one of `sinceTime` or `sinceSeconds` may be specified",
                )
            )
        if causes:
            raise errors.invalid("PodLogOptions", "", name, causes)
        return opts


def pick_container(pod: Obj, wanted: str) -> str:
    """The container a request reads, refused in the API server's words."""
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    names = [c["name"] for c in spec.get("containers") or []]
    inits = [c["name"] for c in spec.get("initContainers") or []]
    if not wanted:
        if len(names) == 1:
            return names[0]
        msg = (
            f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
        )
        if inits:
            msg += f" or one of the init containers: [{' '.join(inits)}]"
        raise errors.bad_request(msg)
    if wanted not in names and wanted not in inits:
        raise errors.bad_request(f"container {wanted} is not valid for pod {name}")
    return wanted


def _container_status(pod: Obj, container: str) -> dict[str, Any]:
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in get_path(pod, "status", key, default=[]):
            if cs.get("name") == container:
                return dict(cs)
    return {}


@dataclass
class Window:
    """When a container ran: start, and its end if it terminated (cluster clock)."""

    start: float
    end: float | None
    exit_code: int | None


def window(pod: Obj, container: str, previous: bool) -> Window:
    """The container's run, or the kubelet's refusal (not started, no previous one)."""
    name = pod["metadata"]["name"]
    cs = _container_status(pod, container)
    if previous:
        raise errors.bad_request(
            f'previous terminated container "{container}" in pod "{name}" not found'
        )
    state = cs.get("state") or {}
    if "running" in state:
        return Window(parse_time(state["running"]["startedAt"]).timestamp(), None, None)
    if "terminated" in state:
        term = state["terminated"]
        return Window(
            parse_time(term["startedAt"]).timestamp(),
            parse_time(term["finishedAt"]).timestamp(),
            int(term.get("exitCode", 0)),
        )
    reason = get_path(state, "waiting", "reason", default="ContainerCreating")
    raise errors.bad_request(
        f'container "{container}" in pod "{name}" is waiting to start: {reason}'
    )


def _head_lines(cluster: ClusterView, pod: Obj, w: Window) -> list[Line]:
    ip = get_path(pod, "status", "podIP", default="127.0.0.1")
    t = w.start
    p = ray_stamp(t)
    out = [
        (t, f"{p}\tINFO usage_lib.py:467 -- Usage stats collection is disabled."),
        (t, f"{p}\tINFO scripts.py:865 -- Local node IP: {ip}"),
        (t, f"{p}\tSUCC scripts.py:902 -- --------------------"),
        (t, f"{p}\tSUCC scripts.py:903 -- Ray runtime started."),
        (t, f"{p}\tSUCC scripts.py:904 -- --------------------"),
        (t, f"{p}\tINFO scripts.py:906 -- Next steps"),
        (t, f"{p}\tINFO scripts.py:909 -- To add another node to this Ray cluster, run"),
        (t, f"{p}\tINFO scripts.py:912 --   ray start --address='{ip}:6379'"),
        (t, f"{p}\tINFO scripts.py:921 -- To connect to this Ray cluster:"),
        (t, f"{p}\tINFO scripts.py:923 --   import ray"),
        (t, f"{p}\tINFO scripts.py:924 --   ray.init()"),
        (t, f"{p}\tINFO scripts.py:936 -- To submit a Ray job using the Ray Jobs CLI:"),
        (
            t,
            f"{p}\tINFO scripts.py:937 --   RAY_ADDRESS='http://{ip}:8265' ray job submit "
            "--working-dir . -- python my_script.py",
        ),
        (t, f"{p}\tINFO scripts.py:955 -- To view the status of the cluster, use"),
        (t, f"{p}\tINFO scripts.py:956 --   ray status"),
        (t, f"{p}\tINFO scripts.py:960 -- To monitor and debug Ray, view the dashboard at "),
        (t, f"{p}\tINFO scripts.py:961 --   {ip}:8265"),
        (t, f"{p}\tINFO scripts.py:1032 -- --block"),
        (
            t,
            f"{p}\tINFO scripts.py:1033 -- This command will now block forever until "
            "terminated by a signal.",
        ),
    ]
    labels = pod["metadata"].get("labels") or {}
    table = cluster.rayruntime.heads.get(
        (pod["metadata"]["namespace"], labels.get("ray.io/cluster", "")), {}
    )
    for run in table.values():
        if run.kind != "SUBMISSION":
            continue  # an interactive driver is no job of the job manager
        out.append(
            (
                run.submitted,
                f"{ray_stamp(run.submitted)}\tINFO job_manager.py:531 -- "
                f"Starting job with submission_id: {run.job_id}",
            )
        )
        end = run.end_time(float("inf"))
        if end is not None:
            out.append(
                (
                    end,
                    f"{ray_stamp(end)}\tINFO job_manager.py:303 -- "
                    f"Job {run.job_id} finished: {run.status(end)}",
                )
            )
    return out


def _worker_lines(pod: Obj, w: Window) -> list[Line]:
    labels = pod["metadata"].get("labels") or {}
    ip = get_path(pod, "status", "podIP", default="127.0.0.1")
    ns = pod["metadata"]["namespace"]
    head = f"{labels.get('ray.io/cluster', 'ray')}-head-svc.{ns}.svc.cluster.local:6379"
    group = labels.get("ray.io/group", "")
    p = ray_stamp(w.start)
    return [
        (w.start, f"{p}\tINFO scripts.py:1047 -- Local node IP: {ip}"),
        (w.start, f"{p}\tSUCC scripts.py:1063 -- --------------------"),
        (w.start, f"{p}\tSUCC scripts.py:1064 -- Ray runtime started."),
        (w.start, f"{p}\tSUCC scripts.py:1065 -- --------------------"),
        (w.start, f"{p}\tINFO scripts.py:1067 -- To terminate the Ray runtime, run"),
        (w.start, f"{p}\tINFO scripts.py:1068 --   ray stop"),
        (
            w.start,
            f"{p}\tINFO scripts.py:1076 -- Joined the Ray cluster at {head} (group {group})",
        ),
        (w.start, f"{p}\tINFO scripts.py:1032 -- --block"),
        (
            w.start,
            f"{p}\tINFO scripts.py:1033 -- This command will now block forever until "
            "terminated by a signal.",
        ),
    ]


def _submitter_lines(trace: SubmitterTrace, w: Window, until: float) -> list[Line]:
    address = trace.address if trace.address.startswith("http") else f"http://{trace.address}"
    out: list[Line] = []
    # The GCS health loop echoes every 2 s until the head answers.
    ready = trace.attached if trace.attached is not None else until
    t = w.start
    while trace.waited and t < ready and t <= until:
        out.append((t, f"Waiting for Ray Dashboard GCS to become healthy at {address} ..."))
        t += 2
    run = trace.run
    if run is None:
        return out
    if trace.submitted_here:
        s = run.submitted
        p = ray_stamp(s)
        rule = "-" * 55
        out += [
            (s, f"{p}\tINFO cli.py:39 -- Job submission server address: {address}"),
            (s, f"{p}\tSUCC cli.py:63 -- {rule}"),
            (s, f"{p}\tSUCC cli.py:64 -- Job '{run.job_id}' submitted successfully"),
            (s, f"{p}\tSUCC cli.py:65 -- {rule}"),
            (s, f"{p}\tINFO cli.py:289 -- Next steps"),
            (s, f"{p}\tINFO cli.py:290 -- Query the logs of the job:"),
            (s, f"{p}\tINFO cli.py:292 -- ray job logs {run.job_id}"),
            (s, f"{p}\tINFO cli.py:294 -- Query the status of the job:"),
            (s, f"{p}\tINFO cli.py:296 -- ray job status {run.job_id}"),
            (s, f"{p}\tINFO cli.py:298 -- Request the job to be stopped:"),
            (s, f"{p}\tINFO cli.py:300 -- ray job stop {run.job_id}"),
        ]
    horizon = until if trace.lost is None else min(until, trace.lost)
    out += driver_lines(run, address, w.start, horizon)
    if trace.lost is not None and trace.lost <= until:
        out.append(
            (
                trace.lost,
                f"{ray_stamp(trace.lost)}\tERROR -- Failed to connect to Ray at address: "
                f"{address}: the connection was lost",
            )
        )
    return out


def _generic_lines(pod: Obj, container: str, w: Window, until: float) -> list[Line]:
    image = next(
        (
            c.get("image", "")
            for c in get_path(pod, "spec", "containers", default=[])
            if c.get("name") == container
        ),
        "",
    )
    out = [
        (
            w.start,
            f"kubesim: container {container} started (image {image}); processes are simulated",
        )
    ]
    t = w.start + GENERIC_PERIOD
    while t <= until:
        out.append((t, f"kubesim: container {container} running for {int(t - w.start)}s"))
        t += GENERIC_PERIOD
    return out


def lines(cluster: ClusterView, pod: Obj, container: str, w: Window, until: float) -> list[Line]:
    """Every line the container wrote by ``until`` (and, if it ended, its end), sorted."""
    # finishedAt has second precision (floored): a line written in the container's last
    # second must not be cut off.
    horizon = until if w.end is None else min(until, w.end + 1.0)
    labels = pod["metadata"].get("labels") or {}
    key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
    trace = cluster.rayruntime.traces.get(key)
    first = (get_path(pod, "spec", "containers", default=[{}]) or [{}])[0].get("name")
    real = _real_output(cluster, key) if container == first else None
    if real is not None:
        out = [(w.start, text) for text in real]
    elif trace is not None and container == first:
        out = _submitter_lines(trace, w, horizon)
    elif labels.get("ray.io/node-type") == "head" and container == first:
        out = _head_lines(cluster, pod, w)
    elif labels.get("ray.io/node-type") == "worker" and container == first:
        out = _worker_lines(pod, w)
    else:
        out = _generic_lines(pod, container, w, horizon)
    out = [(t, text) for t, text in out if t <= horizon]
    out.sort(key=lambda item: item[0])
    return out


def _real_output(cluster: ClusterView, key: tuple[str, str]) -> list[str] | None:
    """What the pod's real processes wrote (kept after they end), or None if it had none."""
    root = cluster.localprocs.root
    folder = Path(root, *key) if root is not None else None
    if folder is None or not folder.is_dir():
        return None
    out: list[str] = []
    for log in sorted(folder.glob("*/output.log")):
        out += log.read_text(errors="replace").splitlines()
    return out


def render(batch: list[Line], timestamps: bool) -> bytes:
    """Lines as the kubelet returns them (``timestamps``: RFC 3339 nano prefix)."""
    if timestamps:
        return b"".join(f"{stamp_nano(t)} {text}\n".encode() for t, text in batch)
    return b"".join(f"{text}\n".encode() for _, text in batch)


def select(batch: list[Line], opts: LogOptions, now: float) -> list[Line]:
    """``sinceSeconds``/``sinceTime`` then ``tailLines``."""
    since = opts.since_time
    if opts.since_seconds is not None:
        since = now - opts.since_seconds
    if since is not None:
        batch = [item for item in batch if item[0] >= since]
    if opts.tail_lines is not None:
        batch = batch[len(batch) - opts.tail_lines :] if opts.tail_lines else []
    return batch


@dataclass
class LogRead:
    """One read of a container's log: the bytes so far and where a follow resumes."""

    body: bytes
    seen: int  # lines of ``lines()`` already accounted for
    done: bool  # the container has terminated: nothing more will come


def read(
    cluster: ClusterView, ns: str, name: str, opts: LogOptions, seen: int | None = None
) -> LogRead:
    """Read (with the cluster lock held) the log of ``ns/name``; ``seen`` None for the first
    read of a request (options applied), else the lines already sent by a follow."""
    pod = cluster.store.get("pods", ns, name)
    if pod is None:
        raise errors.not_found("pods", "", name)
    container = pick_container(pod, opts.container)
    w = window(pod, container, opts.previous)
    now = cluster.clock.time()
    everything = lines(cluster, pod, container, w, now)
    chosen = select(everything, opts, now) if seen is None else everything[seen:]
    return LogRead(render(chosen, opts.timestamps), len(everything), w.end is not None)


__all__ = ["ApiError", "LogOptions", "LogRead", "driver_output", "read"]
