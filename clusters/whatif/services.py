"""The what-if planner: the world as it is against a changed one, on the same requests.

``whatif_compare`` (``manage.py whatif`` and the platform page) replays a workload (a
recorded period, or a seeded synthetic week) on the world and on a changed copy with the
product's own admission pass, and returns the figures side by side. Changes, one a
line: ``nodes:h100=+8`` (or ``=72``), ``quota:vision/h100=32``, ``borrow:vision/h100=0``,
``weight:vision=2``, ``idle:vision=30`` (0: off; ``idle:*`` for every tenant),
``topology:h100=rack`` (every multi-node production gang on h100 requires one rack),
``half-life:168`` (usage-decayed fair share with that half-life in hours; 0: off),
``notice:600`` (preemption with that many seconds' notice, runs checkpointing on notice
and queued again in their place in line; ``notice:off``: today's warning) and
``requeue:back`` or ``requeue:place`` (where a run preempted with notice queues again).
"""

from __future__ import annotations

import multiprocessing
import re
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import TypeVar

from clusters.admission import QuotaQ
from clusters.admission.topology_room import level_word
from clusters.whatif.change import Change, WhatIfError
from clusters.whatif.metrics import Figures, figures
from clusters.whatif.model import POLICY, IdlePolicy, Workload, World
from clusters.whatif.policy_changes import POLICY_CHANGE, apply_policy, policy_change
from clusters.whatif.replay_state import Outcome
from clusters.whatif.simulator import PASS_SECONDS, simulate
from clusters.whatif.workload import PARENT, WEEK, large_fleet, synthetic_week, with_checkpoints

# Said on the page, in the command's output and in docs/whatif.md.
NOT_MODELLED = (
    "Pod start-up, image pulls, the reconciler's latency and Ray heads on CPU nodes: a "
    "request runs the moment the pass admits it.",
    f"Passes run on a {PASS_SECONDS:.0f}-second grid, so every wait is rounded up to it.",
    "People: nobody gives up waiting, resubmits elsewhere or asks for something "
    "smaller; a request deleted before it ever started is not replayed.",
    "A cluster suspended for idleness is not resumed; one suspended by a reclaim queues "
    "again at once with what was left of its life.",
    "Use inside a cluster is one busy stretch followed by idleness; GPU utilisation, "
    "Ray's autoscaling within a cluster and node failures are not modelled.",
    "The cluster autoscaler (capacity on demand), holds, manual priorities changed "
    "while waiting, per-engineer caps, CPU and memory quotas are not modelled.",
    "Kueue mode is not modelled: the built-in queue's decision is replayed.",
    "Checkpoints: a recorded run's are not known (it loses no work); loading one on resume "
    "takes no time; with a half-life, usage before the period counts as none.",
)

T = TypeVar("T")

_CHANGE = re.compile(r"^(nodes|quota|borrow|weight|idle):([\w*-]+)(?:/([\w-]+))?=([+-]?[\d.]+)$")
# A level: its label key or the key's last word (rack for network.topology.kubernetes.io/rack).
_TOPOLOGY = re.compile(r"^topology:([\w-]+)=([\w./-]+)$")


@dataclass
class Comparison:
    """The figures of the world as it is and of the changed world, on one workload."""

    label: str
    requests: int
    days: float
    changes: list[Change]
    as_is: Figures
    changed: Figures
    seconds: float
    not_modelled: tuple[str, ...] = NOT_MODELLED
    recorded: dict[str, float] = field(default_factory=dict)


def parse_changes(lines: list[str]) -> list[Change]:
    """Changes from their text, one per line; blank lines are skipped."""
    changes = []
    for raw in lines:
        text = raw.strip()
        if not text:
            continue
        policy = POLICY_CHANGE.match(text)
        if policy is not None:
            changes.append(policy_change(text, *policy.groups()))
            continue
        topology = _TOPOLOGY.match(text)
        if topology is not None:
            name, level = topology.groups()
            changes.append(Change("topology", name, name, Decimal(0), False, text, level))
            continue
        match = _CHANGE.match(text)
        if match is None:
            raise WhatIfError(
                f"Cannot read the change {text!r}: write nodes:FLAVOR=N or =+N, "
                "quota:TENANT/FLAVOR=N, borrow:TENANT/FLAVOR=N, weight:TENANT=N, "
                "idle:TENANT=MINUTES (idle:*=MINUTES for every tenant), "
                "topology:FLAVOR=LEVEL, half-life:HOURS, notice:SECONDS (or notice:off) or "
                "requeue:back (or requeue:place)."
            )
        what, name, flavor, value = match.groups()
        needs_flavor = what in ("quota", "borrow")
        if needs_flavor != (flavor is not None):
            form = f"{what}:TENANT/FLAVOR=N" if needs_flavor else f"{what}:NAME=N"
            raise WhatIfError(f"Cannot read the change {text!r}: write {form}.")
        try:
            number = Decimal(value)
        except InvalidOperation as error:  # pragma: no cover - the pattern admits numbers only
            raise WhatIfError(f"{value!r} is not a number in {text!r}.") from error
        relative = value[0] in "+-"
        if relative and what != "nodes":
            raise WhatIfError(f"Only node counts may change by +N or -N, not in {text!r}.")
        if what != "weight" and number != number.to_integral_value():
            raise WhatIfError(f"{text!r} needs a whole number.")
        if what == "weight" and number <= 0:
            raise WhatIfError(f"A weight must be above 0, not in {text!r}.")
        changes.append(Change(what, name, flavor or "", number, relative, text))
    return changes


def apply_changes(world: World, changes: list[Change]) -> World:
    """A copy of ``world`` with ``changes`` applied; unknown tenants or flavors are refused."""
    flavors = {f.name: f for f in world.flavors}
    tenants = {t.slug: t for t in world.tenants}
    quotas = {(q.tenant, q.flavor): q for q in world.quotas}
    idle = dict(world.idle)
    gang_topology = dict(world.gang_topology)
    for c in changes:
        if c.what in ("half-life", "notice", "requeue"):
            world = apply_policy(world, c)
            continue
        if c.what == "topology":
            flavor = _known(flavors, c.name, "flavor", c.text)
            gang_topology[c.name] = _level_of(flavor.topology, world, c)
            continue
        if c.what == "nodes":
            flavor = _known(flavors, c.name, "flavor", c.text)
            count = int(flavor.node_count + c.value if c.relative else c.value)
            if count < 0:
                raise WhatIfError(f"{c.text!r} leaves {c.name} with fewer than no nodes.")
            flavors[c.name] = replace(flavor, node_count=count)
            continue
        if c.what in ("quota", "borrow"):
            _known(tenants, c.name, "tenant", c.text)
            _known(flavors, c.flavor, "flavor", c.text)
            quota = quotas.get((c.name, c.flavor)) or QuotaQ(c.name, c.flavor, 0)
            if c.what == "quota":
                lend = quota.lend_limit
                quota = replace(
                    quota,
                    gpus=int(c.value),
                    lend_limit=None if lend is None else min(lend, int(c.value)),
                )
            else:
                quota = replace(quota, borrow_limit=int(c.value))
            quotas[c.name, c.flavor] = quota
        elif c.what == "weight":
            tenant = _known(tenants, c.name, "tenant", c.text)
            tenants[c.name] = replace(tenant, weight=c.value)
        else:
            slugs = (
                list(tenants) if c.name == "*" else [_known(tenants, c.name, "tenant", c.text).slug]
            )
            for slug in slugs:
                idle[slug] = replace(
                    world.idle_of(slug) if slug in world.idle else IdlePolicy(),
                    minutes=float(c.value),
                )
    return replace(
        world,
        flavors=list(flavors.values()),
        tenants=list(tenants.values()),
        quotas=list(quotas.values()),
        idle=idle,
        gang_topology=gang_topology,
    )


def _level_of(levels: tuple[str, ...], world: World, c: Change) -> str:
    """The level of a flavor's topology a ``topology:`` change names (its key or its
    key's last word); a flavor whose nodes' places the world does not know is refused."""
    found = [key for key in levels if c.level in (key, level_word(key))]
    if not found or c.name not in world.node_domains:
        known = ", ".join(levels) or "none"
        raise WhatIfError(
            f"{c.name} has no topology level {c.level!r} whose nodes this world places, "
            f"in {c.text!r} (its levels: {known})."
        )
    return found[0]


def _known(things: dict[str, T], name: str, noun: str, text: str) -> T:
    found = things.get(name)
    if found is None:
        known = ", ".join(sorted(things)) or "none"
        raise WhatIfError(f"No {noun} called {name!r} in {text!r} (known: {known}).")
    return found


def synthetic(*, seed: int, days: float, load: float) -> tuple[World, Workload]:
    """A seeded synthetic period on kubesim's large fleet with ten tenants."""
    if not 0 < days <= 28:
        raise WhatIfError("A synthetic period is between 0 and 28 days long.")
    if not 0 < load <= 5:
        raise WhatIfError(
            "The load is the GPU-hours asked for in working hours over the fleet's: above 0, "
            "at most 5."
        )
    world = large_fleet(parent=PARENT)
    week = synthetic_week(world, seed=seed, load=load, seconds=min(days * 86400, 28 * 86400))
    # Its jobs and production gangs checkpoint, so that a notice: change shows lost work.
    return world, with_checkpoints(week)


def recorded(*, start: datetime, end: datetime) -> tuple[World, Workload]:
    """The world as it is and the requests of ``[start, end)`` from the database."""
    from clusters.whatif import history

    if end <= start:
        raise WhatIfError("The period must end after it starts.")
    if end - start > timedelta(days=28):
        raise WhatIfError("A recorded period is at most 28 days long.")
    return history.world_now(), history.recorded_period(start=start, end=end)


def whatif_compare(
    *,
    world: World,
    workload: Workload,
    changes: list[Change],
    pass_seconds: float = PASS_SECONDS,
) -> Comparison:
    """Replay ``workload`` on ``world`` and on ``world`` with ``changes``; their figures."""
    changed_world = apply_changes(world, changes)
    began = time.perf_counter()
    worlds = [world, changed_world] if changes else [world]
    outcomes = _simulate_each(worlds, workload, pass_seconds)
    as_is = figures(world, outcomes[0])
    changed = figures(changed_world, outcomes[1]) if changes else as_is
    recorded_waits = [d.recorded_wait for d in workload.demands if d.recorded_wait is not None]
    recorded_summary = {}
    if recorded_waits:
        recorded_summary = {"mean_wait": sum(recorded_waits) / len(recorded_waits)}
    return Comparison(
        label=workload.label,
        requests=len(workload.demands),
        days=workload.seconds / 86400,
        changes=changes,
        as_is=as_is,
        changed=changed,
        seconds=time.perf_counter() - began,
        recorded=recorded_summary,
    )


# From this many requests on, the changed world is simulated in a child process beside
# the world as it is (a simulated week on the large fleet is about 1,550): the comparison
# then takes as long as one world on a machine with two CPUs. Shorter replays are not worth
# a process, and stay in the caller's (tests run pages in threads, where forking is best
# avoided).
PARALLEL_FROM_REQUESTS = 1000


def _simulate_each(worlds: list[World], workload: Workload, pass_seconds: float) -> list[Outcome]:
    """``workload`` simulated on each of ``worlds`` under our policy, in order."""
    if len(worlds) < 2 or len(workload.demands) < PARALLEL_FROM_REQUESTS:
        return [simulate(w, workload, mode=POLICY, pass_seconds=pass_seconds) for w in worlds]
    # fork: the child inherits the loaded code and the workload instead of importing
    # Django again; the simulation is pure, so it touches no connection it inherited.
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=len(worlds) - 1, mp_context=context) as pool:
        others = [
            pool.submit(simulate, w, workload, mode=POLICY, pass_seconds=pass_seconds)
            for w in worlds[1:]
        ]
        first = simulate(worlds[0], workload, mode=POLICY, pass_seconds=pass_seconds)
        return [first, *(f.result() for f in others)]


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def summary_rows(c: Comparison) -> list[tuple[str, str, str]]:
    """The headline figures as (what, as is, changed) rows."""
    a, b = c.as_is, c.changed
    return [
        ("GPU allocation while oversubscribed", _pct(a.allocation), _pct(b.allocation)),
        (
            "Hours oversubscribed",
            f"{a.oversubscribed_hours:.1f}",
            f"{b.oversubscribed_hours:.1f}",
        ),
        ("Fairness (Jain's index of weighted shares)", _ratio(a.jain), _ratio(b.jain)),
        ("Mean wait", _duration(a.mean_wait), _duration(b.mean_wait)),
        ("95th percentile wait", _duration(a.p95_wait), _duration(b.p95_wait)),
        ("Starved (waited over 12 h)", str(a.starved), str(b.starved)),
        ("Never started", str(a.unserved), str(b.unserved)),
        ("GPU-hours held", f"{a.gpu_hours:,.0f}", f"{b.gpu_hours:,.0f}"),
        ("  of which idle", f"{a.idle_gpu_hours:,.0f}", f"{b.idle_gpu_hours:,.0f}"),
        (
            "Idle GPU-hours given back",
            f"{a.idle_reclaimed_gpu_hours:,.0f}",
            f"{b.idle_reclaimed_gpu_hours:,.0f}",
        ),
        ("Clusters reclaimed from borrowers", str(a.reclaims), str(b.reclaims)),
        (
            "Weekly fairness (Jain's index over the period)",
            _ratio(a.weekly_jain),
            _ratio(b.weekly_jain),
        ),
        ("GPU-hours lost to preemption", f"{a.lost_gpu_hours:,.0f}", f"{b.lost_gpu_hours:,.0f}"),
        (
            "Preemptions per request (mean / most)",
            f"{a.preemptions_mean:.2f} / {a.preemptions_max}",
            f"{b.preemptions_mean:.2f} / {b.preemptions_max}",
        ),
    ]


def tenant_rows(c: Comparison) -> list[tuple[str, int, str, str, str, str, str, str]]:
    """Per tenant: requests, mean and p95 wait and GPU-hours, as is and changed."""
    changed = {t.tenant: t for t in c.changed.tenants}
    rows = []
    for a in c.as_is.tenants:
        b = changed.get(a.tenant, a)
        rows.append(
            (
                a.tenant,
                a.requests,
                _duration(a.mean_wait),
                _duration(b.mean_wait),
                _duration(a.p95_wait),
                _duration(b.p95_wait),
                f"{a.gpu_hours:,.0f}",
                f"{b.gpu_hours:,.0f}",
            )
        )
    return rows


def render_text(c: Comparison) -> str:
    """The comparison as the command prints it."""
    changes = ", ".join(ch.text for ch in c.changes) or "none (the world as it is, twice)"
    lines = [
        f"What-if over {c.label}: {c.requests} requests, {c.days:.1f} days.",
        f"Changes: {changes}",
        "",
        f"{'':44} {'as is':>12} {'changed':>12}",
    ]
    lines += [f"{what:44} {a:>12} {b:>12}" for what, a, b in summary_rows(c)]
    if c.recorded:
        lines.append(
            f"{'Recorded mean wait (for comparison)':44} {_duration(c.recorded['mean_wait']):>12}"
        )
    lines += [
        "",
        f"{'tenant':16} {'requests':>8} {'mean wait':>19} {'p95 wait':>19} {'GPU-hours':>19}",
        f"{'':16} {'':>8} {'as is':>9} {'changed':>9} {'as is':>9} {'changed':>9} "
        f"{'as is':>9} {'changed':>9}",
    ]
    for slug, n, ma, mb, pa, pb, ga, gb in tenant_rows(c):
        lines.append(f"{slug:16} {n:>8} {ma:>9} {mb:>9} {pa:>9} {pb:>9} {ga:>9} {gb:>9}")
    lines += ["", f"Simulated in {c.seconds:.1f} s.", "", "Not modelled:"]
    lines += [f"- {item}" for item in c.not_modelled]
    return "\n".join(lines)


__all__ = [
    "NOT_MODELLED",
    "WEEK",
    "Change",
    "Comparison",
    "WhatIfError",
    "apply_changes",
    "parse_changes",
    "recorded",
    "render_text",
    "summary_rows",
    "synthetic",
    "tenant_rows",
    "whatif_compare",
]
