"""A simulated Ray driver that checkpoints, as a real driver using ``gangway_preemption``
would (simulator-only knob ``kubesim.io/job-checkpoint`` on the RayJob; kubesim/README.md,
*Simulated Ray drivers*): ``on-notice`` when given a preemption notice, ``every-<n>s``
each ``n`` seconds of work (for Kueue, which preempts without notice).

Such a driver reads its pod environment as a real one would: ``GANGWAY_RESUME_FROM``
(a ``sim://<job>/step-<n>`` URI it wrote earlier: it runs only the work left after
step ``n``) and ``GANGWAY_PREEMPTION_URL``. It reports ``sim://<job>/step-<done>``
(``done``: the seconds of work behind it, counting the steps it resumed from) with
``POST <url>checkpoint/``, off the simulator's lock: an ``on-notice`` one when its head
pod gains the ``gangway.dev/preemption-notice`` annotation, an ``every-<n>s`` one at each
multiple of ``n`` its work reaches. Every driver started is kept in ``runs`` (tests read
how much each was asked to do).
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import urllib.request
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

ANN_CHECKPOINT = "kubesim.io/job-checkpoint"
ON_NOTICE = "on-notice"
# ``every-<n>s``: a checkpoint each ``n`` whole seconds of work.
EVERY = re.compile(r"^every-([1-9]\d*)s$")
NOTICE_ANNOTATION = "gangway.dev/preemption-notice"
RESUME_FROM_ENV = "GANGWAY_RESUME_FROM"
PREEMPTION_URL_ENV = "GANGWAY_PREEMPTION_URL"
STEP = re.compile(r"^sim://[^/]+/step-(\d+(?:\.\d+)?)$")
POST_TIMEOUT_SECONDS = 10.0


@dataclass
class CheckpointingRun:
    """One driver that checkpoints on notice: what it was asked and what it did."""

    rayjob: str
    total: float  # the job's whole work (``kubesim.io/job-run-seconds``)
    resumed_step: float  # the work done before this run (from GANGWAY_RESUME_FROM)
    resume_from: str
    url: str
    start: float = 0.0  # when its work began, on the cluster clock
    noticed: str = ""  # the deadline of the notice it answered
    reported: list[str] | None = None
    every: float = 0.0  # ``every-<n>s``: n; 0: it checkpoints on notice
    saved_step: float = 0.0  # the step of its last periodic checkpoint (or resumed step)
    # The thread posting its latest report: the next waits for it, so that reports
    # arrive in the order the driver saved them, as one driver's calls would.
    poster: threading.Thread | None = field(default=None, repr=False, compare=False)

    def remaining(self) -> float:
        """The work this run has to do."""
        return max(self.total - self.resumed_step, 0.0)

    def done_at(self, at: float) -> float:
        """Seconds of the job's work behind it at ``at`` (whole seconds: the step)."""
        return min(self.resumed_step + max(at - self.start, 0.0), self.total)


def valid(value: str) -> bool:
    """Whether ``value`` is something the knob understands (``""``: no checkpoints)."""
    return value in ("", ON_NOTICE) or EVERY.match(value) is not None


def driver_env(rayjob: dict[str, Any] | None, runtime_env: dict[str, Any] | None) -> dict[str, str]:
    """What the driver sees of its environment: the head container's variables, then
    its runtime env's ``env_vars`` (Ray gives those to the driver too)."""
    spec = (rayjob or {}).get("spec") or {}
    head = ((spec.get("rayClusterSpec") or {}).get("headGroupSpec") or {}).get("template") or {}
    containers = (head.get("spec") or {}).get("containers") or [{}]
    env = {str(e.get("name")): str(e.get("value") or "") for e in containers[0].get("env") or []}
    env.update({str(k): str(v) for k, v in ((runtime_env or {}).get("env_vars") or {}).items()})
    return env


def plan(
    rayjob: dict[str, Any] | None,
    runtime_env: dict[str, Any] | None,
    total: float,
    *,
    default: str = "",
) -> CheckpointingRun | None:
    """The checkpointing run a RayJob asks for (its annotation, else ``default``: the
    simulator's setting), or None when the knob says nothing of it."""
    meta = (rayjob or {}).get("metadata") or {}
    mode = (meta.get("annotations") or {}).get(ANN_CHECKPOINT, default)
    periodic = EVERY.match(mode)
    if mode != ON_NOTICE and periodic is None:
        return None
    env = driver_env(rayjob, runtime_env)
    resume = env.get(RESUME_FROM_ENV, "")
    found = STEP.match(resume)
    step = min(float(found.group(1)) if found else 0.0, total)
    return CheckpointingRun(
        rayjob=str(meta.get("name") or ""),
        total=total,
        resumed_step=step,
        resume_from=resume,
        url=env.get(PREEMPTION_URL_ENV, ""),
        reported=[],
        every=float(periodic.group(1)) if periodic else 0.0,
        saved_step=step,
    )


def on_notice(run: CheckpointingRun, pod: dict[str, Any], at: float) -> str | None:
    """The head pod ``pod`` changed: when it carries a notice this run has not answered,
    report a checkpoint (in a thread) and return its URI."""
    deadline = ((pod.get("metadata") or {}).get("annotations") or {}).get(NOTICE_ANNOTATION)
    if run.every or not deadline or deadline == run.noticed or not run.url:
        return None
    run.noticed = deadline
    return _report(run, run.done_at(at))


def periodic(run: CheckpointingRun, at: float) -> float | None:
    """An ``every-<n>s`` run at ``at``: report the newest multiple of ``n`` its work has
    reached since its last checkpoint (one report, however many it passed), and return
    when on the cluster clock its work reaches the next one (None: it ends first, or the
    run does not checkpoint periodically)."""
    if not run.every or not run.url:
        return None
    # The clock's float arithmetic may put a wake a hair before the step it was set for.
    done = run.done_at(at) + 1e-6
    step = math.floor(done / run.every) * run.every
    if run.saved_step < step < run.total:
        run.saved_step = step
        _report(run, step)
    following = step + run.every
    if following >= run.total:
        return None  # its work ends first: nothing left to save
    return run.start + (following - run.resumed_step)


def _report(run: CheckpointingRun, step: float) -> str:
    """Report ``sim://<job>/step-<step>`` (in a thread) and return it."""
    uri = f"sim://{run.rayjob}/step-{int(step)}"
    if run.reported is not None:
        run.reported.append(uri)
    run.poster = threading.Thread(target=_post, args=(run.url, uri, run.poster), daemon=True)
    run.poster.start()
    return uri


def _post(url: str, uri: str, after: threading.Thread | None = None) -> None:
    """``POST <url>checkpoint/ {"uri": ...}``, as ``gangway_preemption.checkpoint_saved``,
    once the report before it (``after``) is done."""
    if after is not None:
        after.join()
    body = json.dumps({"uri": uri}).encode()
    request = urllib.request.Request(
        url.rstrip("/") + "/checkpoint/",
        data=body,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=POST_TIMEOUT_SECONDS) as answer:
            answer.read()
    except OSError as exc:  # a real driver would log it and go on saving
        log.warning("checkpoint report to %s failed: %s", url, exc)
