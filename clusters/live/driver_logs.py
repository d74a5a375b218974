"""Reading a job's driver output: from its submitter pod while it exists, else the tail
kept on the row when the job ended (:func:`clusters.kinds.rayjob.engine.keep_log_tail`).

Bounded both ways — a number of lines and a number of bytes — so a chatty driver cannot
make the control plane read or send megabytes. The API and the dashboard's live tail
both read through :func:`driver_log`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from clusters.domain.states import State
from clusters.kinds.rayjob import engine
from clusters.kube.gateway import KubeError, PermanentKubeError, get_gateway
from clusters.models import ClusterRequest

DEFAULT_TAIL = 200
MAX_TAIL = 5000
DEFAULT_BYTES = 256 * 1024
MAX_BYTES = 1024 * 1024


@dataclass(frozen=True)
class LogBounds:
    """How much of the log to read: the last ``tail`` lines, at most ``limit_bytes``."""

    tail: int = DEFAULT_TAIL
    limit_bytes: int = DEFAULT_BYTES

    @classmethod
    def parse(cls, params: Mapping[str, Any]) -> LogBounds:
        """From query parameters ``tail`` and ``limit_bytes``; a bad one is a 400."""
        errors: dict[str, str] = {}
        values = {}
        for key, default, most in (
            ("tail", DEFAULT_TAIL, MAX_TAIL),
            ("limit_bytes", DEFAULT_BYTES, MAX_BYTES),
        ):
            raw = params.get(key)
            if raw in (None, ""):
                values[key] = default
                continue
            # Decimal digits only: int() also takes "1_000", "+5", " 5" and other
            # scripts' digits, which the schema (type: integer) does not.
            text = str(raw)
            value = int(text) if text.isascii() and text.isdigit() else 0
            if not 1 <= value <= most:
                errors[key] = f"A whole number from 1 to {most}."
            values[key] = value
        if errors:
            raise ValidationError(errors)
        return cls(**values)


@dataclass(frozen=True)
class DriverLog:
    """What was found: ``origin`` ``pod`` (read now), ``saved`` (kept at the end) or
    ``none``; ``message`` says why there is nothing, or what went wrong, in plain words."""

    origin: str
    pod: str
    text: str
    truncated: bool
    message: str


def bounded(text: str, bounds: LogBounds) -> tuple[str, bool]:
    lines = text.splitlines(keepends=True)
    truncated = len(lines) > bounds.tail
    kept = "".join(lines[-bounds.tail :])
    data = kept.encode()
    if len(data) > bounds.limit_bytes:
        kept = data[-bounds.limit_bytes :].decode("utf-8", errors="ignore")
        truncated = True
    return kept, truncated


def driver_log(request: ClusterRequest, bounds: LogBounds) -> DriverLog:
    """The driver's output within ``bounds``; see the module docstring."""
    if request.state in (State.QUEUED, State.ADMITTED):
        return DriverLog("none", "", "", False, "The job has not started yet: no output.")
    saved = request.job.log_tail or ""
    try:
        gw = get_gateway()
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
