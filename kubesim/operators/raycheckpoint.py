"""A simulated Ray driver that checkpoints on a preemption notice, as a real driver using
``gangway_preemption`` would (simulator-only knob ``kubesim.io/job-checkpoint:
on-notice`` on the RayJob; kubesim/README.md, *Simulated Ray drivers*).

Such a driver reads its pod environment as a real one would: ``GANGWAY_RESUME_FROM``
(a ``sim://<job>/step-<n>`` URI it wrote earlier: it runs only the work left after
step ``n``) and ``GANGWAY_PREEMPTION_URL``. When its head pod gains the
``gangway.dev/preemption-notice`` annotation it reports ``sim://<job>/step-<done>``
(``done``: the seconds of work behind it, counting the steps it resumed from) with
``POST <url>checkpoint/``, off the simulator's lock. Every driver started is kept in
``runs`` (tests read how much each was asked to do).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import urllib.request
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

ANN_CHECKPOINT = "kubesim.io/job-checkpoint"
ON_NOTICE = "on-notice"
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

    def remaining(self) -> float:
        """The work this run has to do."""
        return max(self.total - self.resumed_step, 0.0)

    def done_at(self, at: float) -> float:
        """Seconds of the job's work behind it at ``at`` (whole seconds: the step)."""
        return min(self.resumed_step + max(at - self.start, 0.0), self.total)


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
    if (meta.get("annotations") or {}).get(ANN_CHECKPOINT, default) != ON_NOTICE:
        return None
    env = driver_env(rayjob, runtime_env)
    resume = env.get(RESUME_FROM_ENV, "")
    found = STEP.match(resume)
    step = float(found.group(1)) if found else 0.0
    return CheckpointingRun(
        rayjob=str(meta.get("name") or ""),
        total=total,
        resumed_step=min(step, total),
        resume_from=resume,
        url=env.get(PREEMPTION_URL_ENV, ""),
        reported=[],
    )


def on_notice(run: CheckpointingRun, pod: dict[str, Any], at: float) -> str | None:
    """The head pod ``pod`` changed: when it carries a notice this run has not answered,
    report a checkpoint (in a thread) and return its URI."""
    deadline = ((pod.get("metadata") or {}).get("annotations") or {}).get(NOTICE_ANNOTATION)
    if not deadline or deadline == run.noticed or not run.url:
        return None
    run.noticed = deadline
    uri = f"sim://{run.rayjob}/step-{int(run.done_at(at))}"
    if run.reported is not None:
        run.reported.append(uri)
    threading.Thread(target=_post, args=(run.url, uri), daemon=True).start()
    return uri


def _post(url: str, uri: str) -> None:
    """``POST <url>checkpoint/ {"uri": ...}``, as ``gangway_preemption.checkpoint_saved``."""
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
