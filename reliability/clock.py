"""Clock and time: TTLs and idle timers that ran out while the worker was down.

Ready clusters in four groups; the worker and beat are stopped; then each group's clock
is moved as if the worker had been down for hours, longer than every period:

* **expired**: the TTL ran out an hour ago: each must be deleted (reason ``expired``), once;
* **expiring**: it runs out in 10 minutes: each owner warned once, the cluster left alone;
* **idle, grace over**: idle for hours and warned an hour ago (the grace is 15 minutes):
  each suspended (reason ``idle``), once;
* **idle, not warned**: idle for hours, never warned: each warned once, not suspended
  (a warning the worker did not live to send is not skipped).

The worker and beat start again, run until every action is done, are SIGKILLed and
started once more, and run several more periods: no action may be missed or taken twice.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

from reliability.rig import People, Rig, converge

FULL = {"per_group": 5}
QUICK = {"per_group": 1}
GROUPS = ("expired", "expiring", "idle-over", "idle-new")
# The action each group must see exactly once, as (reason of the event, a state move?).
ACTIONS = {
    "expired": "expired",
    "expiring": "expiry_warning",
    "idle-over": "idle",
    "idle-new": "idle_warning",
}
WORKER_ENV = {"ACTIVITY_CHECK_SECONDS": "1"}
CONVERGE_TIMEOUT = 180.0


@dataclass
class Result:
    """The figures of one run."""

    clusters: int = 0
    convergence: float | None = None
    actions: dict[str, Counter[int]] = field(default_factory=dict)  # group -> pk -> count
    missed: int = 0
    doubled: int = 0
    wrong: list[str] = field(default_factory=list)


def _count(reason: str, pks: list[int]) -> Counter[int]:
    """Events of the action per request: a move into ``deleting`` for an expiry (its
    deletion's end carries the same reason), the note or move itself otherwise."""
    from clusters.models import ClusterEvent

    rows = ClusterEvent.objects.filter(cluster_id__in=pks, reason=reason)
    if reason == "expired":
        rows = rows.filter(to_state="deleting")
    return Counter(rows.values_list("cluster_id", flat=True))


def exercise(rig: Rig, people: People, *, quick: bool) -> Result:
    """Run the scenario; see the module docstring."""
    from django.utils import timezone

    from clusters.models import ClusterRequest
    from clusters.requests import services
    from clusters.spec import ClusterSpec

    n = (QUICK if quick else FULL)["per_group"]
    people.tenant.idle_suspend_minutes = 30
    people.tenant.save(update_fields=["idle_suspend_minutes"])
    groups = {
        g: [
            services.cluster_request_create(
                actor=people.admin,
                tenant=people.tenant,
                spec=ClusterSpec(name=f"{g}-{i}", flavor=people.h100, workers=1, ttl_hours=24),
            ).pk
            for i in range(n)
        ]
        for g in GROUPS
    }
    every = [pk for pks in groups.values() for pk in pks]
    result = Result(clusters=len(every))

    def ready() -> bool:
        return ClusterRequest.objects.unscoped().filter(pk__in=every, state="ready").count() == len(
            every
        )

    if converge(ready, timeout=CONVERGE_TIMEOUT) is None:
        raise RuntimeError("the clusters never became ready")
    rig.worker.kill()
    rig.beat.kill()
    now = timezone.now()
    rows = ClusterRequest.objects.unscoped()
    long_ago = now - timedelta(hours=3)
    rows.filter(pk__in=groups["expired"]).update(expires_at=now - timedelta(hours=1))
    rows.filter(pk__in=groups["expiring"]).update(expires_at=now + timedelta(minutes=10))
    rows.filter(pk__in=groups["idle-over"]).update(
        ready_at=long_ago, last_active_at=long_ago, idle_warned_at=now - timedelta(hours=1)
    )
    rows.filter(pk__in=groups["idle-new"]).update(
        ready_at=long_ago, last_active_at=long_ago, idle_warned_at=None
    )
    started = time.monotonic()
    rig.worker.start()
    rig.beat.start()

    def done() -> bool:
        return all(len(_count(ACTIONS[g], groups[g])) == len(groups[g]) for g in GROUPS)

    took = converge(done, timeout=CONVERGE_TIMEOUT)
    result.convergence = None if took is None else time.monotonic() - started
    rig.worker.kill()  # once more: a restart must not act again
    rig.worker.start()
    time.sleep(8)  # several reconcile (0.5 s) and activity (1 s) periods
    for g in GROUPS:
        counts = _count(ACTIONS[g], groups[g])
        result.actions[g] = counts
        result.missed += sum(1 for pk in groups[g] if not counts[pk])
        result.doubled += sum(1 for pk in groups[g] if counts[pk] > 1)
    states = dict(rows.filter(pk__in=every).values_list("pk", "state"))
    for pk in groups["expiring"] + groups["idle-new"]:
        if states[pk] != "ready":
            result.wrong.append(f"request {pk} is {states[pk]}, should be ready")
    for pk in groups["expired"]:
        if states[pk] not in ("deleting", "deleted"):
            result.wrong.append(f"expired request {pk} is {states[pk]}")
    for pk in groups["idle-over"]:
        if states[pk] != "suspended":
            result.wrong.append(f"idle request {pk} is {states[pk]}")
    return result


def section(result: Result, *, quick: bool) -> str:
    """The markdown section of ``docs/reliability.md``."""
    from reliability.rig import loadavg

    n = (QUICK if quick else FULL)["per_group"]
    took = "did not converge" if result.convergence is None else f"{result.convergence:.1f} s"
    lines = [
        "## Clock and time",
        "",
        f"`python -m reliability clock`: {result.clusters} ready clusters, {n} in each of "
        "four groups; the worker and beat stopped; each group's clock moved as if they had "
        "been down for hours: TTL run out an hour ago (must be deleted, reason `expired`), "
        "TTL running out in 10 minutes (owner warned), idle for hours and warned an hour ago "
        "with a 15-minute grace (must be suspended, reason `idle`), idle for hours and never "
        "warned (must be warned, not suspended). Then the worker and beat started, and once "
        "every action was taken the worker was SIGKILLed and started again.",
        "",
        "| Group | action | taken once | taken twice or more | missed |",
        "|---|---|---:|---:|---:|",
    ]
    for g in GROUPS:
        counts = result.actions.get(g, Counter())
        once = sum(1 for c in counts.values() if c == 1)
        more = sum(1 for c in counts.values() if c > 1)
        lines.append(f"| {g} | `{ACTIONS[g]}` | {once} | {more} | {n - len(counts)} |")
    lines += [
        "",
        f"Every action taken {took} after the worker came back; wrong outcomes: "
        f"{len(result.wrong)}. Load average at the end {loadavg()}.",
    ]
    if result.wrong:
        lines += ["", "Wrong: " + "; ".join(result.wrong) + "."]
    return "\n".join(lines)


def run(quick: bool) -> str:
    """``make reliability``'s entry point (its own database, kubesim, worker and beat)."""
    from reliability.rig import seed, standalone

    with standalone("rel_clock", **WORKER_ENV) as rig:
        result = exercise(rig, seed(), quick=quick)
    return section(result, quick=quick)
