"""Reading a job's driver output: from its submitter pod while it exists, else the tail
kept on the row when the job ended (:func:`clusters.kinds.rayjob.engine.keep_log_tail`).

Bounded both ways (:class:`clusters.live.log_bounds.LogBounds`). The API and the
dashboard's live tail both read through :func:`driver_log`.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusters.domain.states import State
from clusters.kinds.rayjob import engine
from clusters.kube.connection import gateway_of
from clusters.kube.gateway import KubeError, PermanentKubeError
from clusters.live.log_bounds import LogBounds, bounded
from clusters.models import ClusterRequest


@dataclass(frozen=True)
class DriverLog:
    """What was found: ``origin`` ``pod`` (read now), ``saved`` (kept at the end) or
    ``none``; ``message`` says why there is nothing, or what went wrong, in plain words."""

    origin: str
    pod: str
    text: str
    truncated: bool
    message: str


def driver_log(request: ClusterRequest, bounds: LogBounds) -> DriverLog:
    """The driver's output within ``bounds``; see the module docstring."""
    if request.state in (State.QUEUED, State.ADMITTED):
        return DriverLog("none", "", "", False, "The job has not started yet: no output.")
    saved = request.job.log_tail or ""
    try:
        gw = gateway_of(request)
        pod = engine.submitter_pod(request, gw)
        if pod is not None:
            name = pod["metadata"]["name"]
            text = gw.pod_log(
                request.namespace,
                name,
                container=engine.SUBMITTER_CONTAINER,
                tail_lines=bounds.tail + 1,  # one more, to tell whether there is more
                limit_bytes=bounds.limit_bytes + 1,
            )
            if text is not None:
                kept, truncated = bounded(text, bounds)
                return DriverLog("pod", name, kept, truncated, "")
    except PermanentKubeError as exc:
        if not saved:
            return DriverLog("none", "", "", False, exc.message)
    except KubeError as exc:
        if not saved:
            return DriverLog(
                "none",
                "",
                "",
                False,
                f"The Kubernetes API did not answer ({exc.message}); try again shortly.",
            )
    if saved:
        kept, truncated = bounded(saved, bounds)
        return DriverLog(
            "saved", "", kept, truncated, "Kept when the job ended; its pods are gone."
        )
    if request.state == State.STARTING:
        return DriverLog(
            "none", "", "", False, "Its Ray cluster is starting; the driver has not been submitted."
        )
    return DriverLog("none", "", "", False, "No output was recorded for this job.")
