"""Hear of a preemption in a Ray job and report checkpoints to gangway (docs/preemption.md).

Standard library only, so it runs in any Ray image: copy this file next to your driver
(or put it in your ``working_dir``). In the pods gangway starts, it reads

- ``GANGWAY_PREEMPTION_URL``: the run's own notice endpoint (no credentials needed);
- ``GANGWAY_PODINFO_ANNOTATIONS``: the pod's annotations as a file (a downward-API
  volume), where ``gangway.dev/preemption-notice`` appears with the deadline;
- ``GANGWAY_RESUME_FROM``: the checkpoint a run resumed after a preemption starts from.

    import gangway_preemption as gp

    start = load(gp.resume_from()) if gp.resume_from() else fresh()
    for step in steps:
        train(step)
        if gp.notice():                  # cheap: a file read, or one GET
            uri = save_checkpoint(step)
            gp.checkpoint_saved(uri)     # the next run gets it as GANGWAY_RESUME_FROM
            break
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

__all__ = ["Notice", "checkpoint_saved", "notice", "resume_from", "wait"]

URL_ENV = "GANGWAY_PREEMPTION_URL"
PODINFO_ENV = "GANGWAY_PODINFO_ANNOTATIONS"
RESUME_ENV = "GANGWAY_RESUME_FROM"
NOTICE_KEY = "gangway.dev/preemption-notice"
REASON_KEY = "gangway.dev/preemption-reason"
TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class Notice:
    """A preemption notice: the run is stopped at ``deadline`` (RFC 3339), for ``reason``."""

    deadline: str
    reason: str


def resume_from() -> str:
    """The checkpoint this run starts from ("" for a first run)."""
    return os.environ.get(RESUME_ENV, "")


def notice(url: str | None = None, podinfo: str | None = None) -> Notice | None:
    """The notice, if the run has one: read from the pod's annotation file when it is
    mounted, else asked of the endpoint (``url``: default ``GANGWAY_PREEMPTION_URL``)."""
    path = podinfo if podinfo is not None else os.environ.get(PODINFO_ENV, "")
    if path and os.path.exists(path):
        found = _from_file(path)
        if found is not None or url is None:
            return found
    endpoint = url or os.environ.get(URL_ENV, "")
    if not endpoint:
        return None
    body = _call(endpoint, None)
    if not body.get("notice"):
        return None
    return Notice(deadline=str(body.get("deadline") or ""), reason=str(body.get("reason") or ""))


def wait(
    timeout: float | None = None, *, interval: float = 5.0, url: str | None = None
) -> Notice | None:
    """Block until the run has notice (returned) or ``timeout`` seconds pass (None)."""
    started = time.monotonic()
    while True:
        found = notice(url)
        if found is not None:
            return found
        if timeout is not None and time.monotonic() - started >= timeout:
            return None
        time.sleep(interval)


def checkpoint_saved(uri: str, url: str | None = None) -> dict[str, object]:
    """Tell gangway the run saved its state at ``uri``; its next run after a preemption
    gets it as ``GANGWAY_RESUME_FROM``. Returns the endpoint's answer."""
    endpoint = url or os.environ.get(URL_ENV, "")
    if not endpoint:
        raise RuntimeError(f"{URL_ENV} is not set: not running in a gangway pod?")
    return _call(endpoint.rstrip("/") + "/checkpoint/", {"uri": uri})


def _from_file(path: str) -> Notice | None:
    """The notice in a downward-API annotations file (``key="value"`` lines)."""
    values: dict[str, str] = {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            key, sep, raw = line.strip().partition("=")
            if sep:
                try:
                    values[key] = json.loads(raw)
                except ValueError:
                    values[key] = raw.strip('"')
    deadline = values.get(NOTICE_KEY)
    return Notice(deadline=deadline, reason=values.get(REASON_KEY, "")) if deadline else None


def _call(url: str, payload: dict[str, str] | None) -> dict[str, object]:
    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(
        url,
        data=data,
        method="POST" if payload is not None else "GET",
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as answer:
            body: dict[str, object] = json.loads(answer.read() or b"{}")
            return body
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:500]
        raise RuntimeError(f"gangway answered {exc.code}: {detail}") from exc
