"""The dashboard's pages of a batch job, as data the shared views and templates fill in:
the words, the list's columns, the detail page's sections, the new form, the buttons and
the driver's log. Fragments that only a job has are templates under ``TEMPLATES``."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from clusters import selectors
from clusters.domain.states import State
from clusters.kinds.rayjob import requests as services
from clusters.kinds.rayjob.driver_logs import driver_log
from clusters.kinds.rayjob.spec import JobSpec
from clusters.kinds.rayjob.states import JOB_FINISHED
from clusters.live.log_bounds import LogBounds
from clusters.models import ClusterRequest, Workload
from clusters.rows.spec import ClusterSpec

WORKLOAD: str = Workload.JOB
NOUN = "job"
PLURAL = "jobs"
HEADING = "Jobs"
PATH = "jobs/"
LIST_PATH = "jobs/"
TEMPLATES = "frontend/kinds/rayjob/"
# Named, not imported: the dashboard's forms sit above clusters/ in the layers.
NEW_FORM = "frontend.forms.JobForm"
SUBMIT_LABEL = "Submit job"
# The tenant menu has no link to the new form: the jobs list offers it.
NAV_NEW: str | None = None
DETAIL_TITLE = "{name} · {tenant} jobs"
# The states a job passes through, in the order it does: the list's filter offers these.
LIST_STATES: tuple[str, ...] | None = (
    State.QUEUED,
    State.ADMITTED,
    State.STARTING,
    State.RUNNING,
    State.SUCCEEDED,
    State.FAILED,
    State.STOPPED,
    State.DELETING,
    State.DELETED,
)
LIST_COLUMNS: tuple[tuple[str, str], ...] = (
    ("State", ""),
    ("Where it stands", ""),
    ("Runs on", ""),
    ("Duration", ""),
    ("GPU-hours", "num"),
)
# The Kubernetes objects as a download: a job's page offers none.
MANIFESTS: Callable[[ClusterRequest], str] | None = None

# Once here, a job's driver runs no more: its output can only shrink to the saved tail.
ENDED = JOB_FINISHED | {State.DELETING, State.DELETED}
# The page's tail: enough to see where a run is, small enough to re-send every few seconds.
LOG_BOUNDS = LogBounds(tail=200, limit_bytes=64 * 1024)

# A button: its service (actor, row, the actor's role, the POST data) and what it says done.
ACTIONS: dict[str, tuple[Callable[[Any, ClusterRequest, str | None, Any], ClusterRequest], str]] = {
    "stop": (
        lambda actor, row, role, data: services.job_stop(actor=actor, request=row, role=role),
        "Stopped; its GPUs are released once its pods are gone.",
    ),
    "delete": (
        lambda actor, row, role, data: services.job_delete(actor=actor, request=row, role=role),
        "Deletion requested; its GPUs are released once its pods are gone.",
    ),
}


def create(
    *, actor: Any, tenant: Any, role: str | None, spec: ClusterSpec | None, details: Any
) -> ClusterRequest:
    """Submit the new form's job (``spec`` is None for one on the user's dev cluster)."""
    assert isinstance(details, JobSpec)
    return services.job_create(actor=actor, tenant=tenant, spec=spec, job=details, role=role)


def verdict(
    *, tenant: Any, owner: Any, role: str | None, spec: ClusterSpec | None, details: Any
) -> dict[str, Any]:
    """The dry-run verdict of the form as it stands, with the job's own checks."""
    return services.job_dry_run(tenant=tenant, owner=owner, spec=spec, job=details, role=role)


def annotate_row(row: ClusterRequest) -> None:
    """What a list row shows besides the row: its GPU-hours (from the prefetched spans)."""
    row.gpu_hours = round(selectors.gpu_hours_of(row), 2)  # type: ignore[attr-defined]


def detail_context(
    row: ClusterRequest, *, actor: Any, role: str | None, base_url: str
) -> dict[str, Any]:
    """The job's sections of its page (and of the polled fragment)."""
    run = row.job
    return {
        "run": run,
        "runtime_env": json.dumps(run.runtime_env, indent=2, sort_keys=True)
        if run.runtime_env
        else "",
        "may_stop": row.state in services.STOPPABLE,
        "may_delete": row.state not in (State.DELETING, State.DELETED),
        "gpu_hours": round(selectors.gpu_hours_of(row), 2),
    }


def log_context(row: ClusterRequest, query: Mapping[str, Any]) -> dict[str, Any]:
    """The last lines of the driver's output (bounded by :data:`LOG_BOUNDS`), or why there
    are none, and whether the panel should still ask."""
    log = driver_log(row, LOG_BOUNDS)
    # A driver that ended and whose pods are gone has said all it will: the saved tail
    # (or nothing) is final, so the panel stops asking.
    ended = row.state in ENDED
    done = row.state == State.DELETED or (ended and log.origin != "pod")
    # ``log_ended``: its output is complete (the panel still asks, until the pods go and
    # the saved tail is final, but nothing new is printed).
    return {"log": log, "log_done": done, "log_ended": ended}


def page_context(row: ClusterRequest) -> dict[str, Any]:
    """What only the whole page shows (outside the polled fragment): the driver's log."""
    return log_context(row, {})
