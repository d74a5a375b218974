"""Clock and time: TTLs and idle timers that ran out while the worker was down.

Ready clusters in five groups (TTL expired, TTL expiring, idle past its grace, idle and never
warned, reclaim past its grace); the worker and beat are stopped and each group's clock is
moved as if they had been down for hours, longer than every period. The worker and beat
then start, run until every action is done, are SIGKILLed and started once more: no action
may be missed or taken twice, and a warning the worker did not live to send is not skipped.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

from reliability.rig import People, Rig, converge

FULL = {"per_group": 5}
QUICK = {"per_group": 1}
GROUPS = ("expired", "expiring", "idle-over", "idle-new", "reclaim-over")
# The action each group must see exactly once, as (reason of the event, a state move?).
ACTIONS = {
    "expired": "expired",
    "expiring": "expiry_warning",
    "idle-over": "idle",
    "idle-new": "idle_warning",
    "reclaim-over": "reclaimed",
}
WORKER_ENV = {"ACTIVITY_CHECK_SECONDS": "1", "RECLAIM_GRACE_SECONDS": "900"}
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


@dataclass
class Scenario:
    """The requests of a run: each group's, the borrower's clusters the pass did not
    choose (``kept``), and the lender's requests (``lenders``)."""

    groups: dict[str, list[int]]
    kept: list[int]
    lenders: list[int]

    @property
    def every(self) -> list[int]:
        return [pk for pks in self.groups.values() for pk in pks] + self.kept


def exercise(rig: Rig, people: People, *, quick: bool) -> Result:
    """Run the scenario of the module docstring; the groups' expected outcomes are in
    :func:`_wrong_outcomes`."""
    n = (QUICK if quick else FULL)["per_group"]
    scenario = _prepare(people, n)
    result = Result(clusters=len(scenario.every))
    rig.worker.kill()
    rig.beat.kill()
    _move_clocks(scenario.groups)
    started = time.monotonic()
    rig.worker.start()
    rig.beat.start()
    groups = scenario.groups

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
    result.wrong += _wrong_outcomes(scenario)
    return result


def _create(owner: People, names: list[str]) -> list[int]:
    """One-GPU dev clusters of ``owner``'s admin, with a day's TTL; their ids."""
    from clusters.requests import services
    from clusters.rows.spec import ClusterSpec

    return [
        services.cluster_request_create(
            actor=owner.admin,
            tenant=owner.tenant,
            spec=ClusterSpec(name=name, flavor=owner.h100, workers=1, ttl_hours=24),
        ).pk
        for name in names
    ]


def _prepare(people: People, n: int) -> Scenario:
    """Every group's clusters ready, and n of the borrower's warned by the pass."""
    from clusters.models import ClusterRequest

    people.tenant.idle_suspend_minutes = 30
    people.tenant.save(update_fields=["idle_suspend_minutes"])
    groups = {g: _create(people, [f"{g}-{i}" for i in range(n)]) for g in GROUPS[:-1]}
    borrower, lender = _cohort(people, n)
    # n on the borrower's own quota, n borrowed from the lender's.
    borrowed = _create(borrower, [f"borrow-{i}" for i in range(2 * n)])
    every = [pk for pks in groups.values() for pk in pks] + borrowed
    rows = ClusterRequest.objects.unscoped()

    def ready() -> bool:
        return rows.filter(pk__in=every, state="ready").count() == len(every)

    if converge(ready, timeout=CONVERGE_TIMEOUT) is None:
        raise RuntimeError("the clusters never became ready")
    # The lender asks for its own quota back: the pass picks n of the borrower's
    # clusters and warns them (they are the group; the other n stay).
    lenders = _create(lender, [f"lend-{i}" for i in range(n)])

    def warned() -> list[int]:
        chosen = rows.filter(pk__in=borrowed, reclaim_after__isnull=False)
        return list(chosen.values_list("pk", flat=True))

    if converge(lambda: len(warned()) == n, timeout=CONVERGE_TIMEOUT) is None:
        raise RuntimeError(f"the pass did not warn {n} borrowing clusters: {warned()}")
    groups["reclaim-over"] = warned()
    kept = sorted(set(borrowed) - set(groups["reclaim-over"]))
    return Scenario(groups=groups, kept=kept, lenders=lenders)


def _move_clocks(groups: dict[str, list[int]]) -> None:
    """Each group's timers as if the worker had been down for hours."""
    from django.utils import timezone

    from clusters.models import ClusterRequest

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
    rows.filter(pk__in=groups["reclaim-over"]).update(reclaim_after=now - timedelta(hours=1))


def _wrong_outcomes(scenario: Scenario) -> list[str]:
    """Requests not in the state their group's action leaves them in, second warnings,
    and lender requests that did not start. Expired: deleted (``expired``); expiring and
    idle-never-warned: left ready (warned once); idle and reclaim past their grace:
    suspended (``idle``, ``reclaimed``), a reclaimed one never warned again."""
    from clusters.models import ClusterRequest

    groups, wrong = scenario.groups, []
    rows = ClusterRequest.objects.unscoped()
    states = dict(rows.filter(pk__in=scenario.every).values_list("pk", "state"))
    for pk in groups["expiring"] + groups["idle-new"] + scenario.kept:
        if states[pk] != "ready":
            wrong.append(f"request {pk} is {states[pk]}, should be ready")
    for pk in groups["expired"]:
        if states[pk] not in ("deleting", "deleted"):
            wrong.append(f"expired request {pk} is {states[pk]}")
    for pk in groups["idle-over"] + groups["reclaim-over"]:
        if states[pk] != "suspended":
            wrong.append(f"request {pk} is {states[pk]}, should be suspended")
    warnings = _count("reclaim_warning", groups["reclaim-over"])
    wrong += [f"request {pk} warned {c} times" for pk, c in warnings.items() if c > 1]

    def lenders_started() -> bool:
        started = rows.filter(
            pk__in=scenario.lenders, state__in=("admitted", "provisioning", "ready")
        )
        return started.count() == len(scenario.lenders)

    if converge(lenders_started, timeout=CONVERGE_TIMEOUT) is None:
        wrong.append("the lender's requests did not start once its quota was back")
    return wrong


def _cohort(people: People, n: int) -> tuple[People, People]:
    """Two tenants of a cohort of their own on ``people``'s flavor: a borrower with n GPUs
    of quota that may borrow n more, and a lender with n that lends them."""
    from django.contrib.auth import get_user_model

    from tenants.models import Membership, Quota, Role, Tenant

    made = []
    for slug, borrow in (("borrower", n), ("lender", 0)):
        tenant = Tenant.objects.create(
            slug=slug,
            name=slug.title(),
            namespace=f"gw-{slug}",
            cohort="reclaim",
            cpu_quota=100000,
            memory_quota_gib=1000000,
            max_dev_clusters_per_user=1000,
            max_dev_gpus_per_user=1000,
        )
        Quota.objects.create(tenant=tenant, flavor=people.h100, gpus=n, borrow_limit=borrow)
        admin = get_user_model().objects.create_user(
            username=f"{slug}-admin", email=f"{slug}@example.com", password=None
        )
        Membership.objects.create(tenant=tenant, user=admin, role=Role.ADMIN)
        made.append(People(tenant=tenant, admin=admin, h100=people.h100))
    return made[0], made[1]


def section(result: Result, *, quick: bool) -> str:
    """The markdown section of ``docs/reliability.md``."""
    from reliability.rig import loadavg

    n = (QUICK if quick else FULL)["per_group"]
    took = "did not converge" if result.convergence is None else f"{result.convergence:.1f} s"
    lines = [
        "## Clock and time",
        "",
        f"`python -m reliability clock`: {result.clusters} ready clusters, {n} in each of "
        "five groups (the reclaim group's borrower has as many again, not chosen); the "
        "worker and beat stopped; each group's clock moved as if they had "
        "been down for hours: TTL run out an hour ago (must be deleted, reason `expired`), "
        "TTL running out in 10 minutes (owner warned), idle for hours and warned an hour ago "
        "with a 15-minute grace (must be suspended, reason `idle`), idle for hours and never "
        "warned (must be warned, not suspended), and borrowing clusters the admission pass "
        "chose to give a lender its quota back, warned, their 15-minute grace run out an hour "
        "ago (must be suspended, reason `reclaimed`, never warned again; the lender's "
        "requests must then start). Then the worker and beat started, and once every action "
        "was taken the worker was SIGKILLed and started again.",
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
