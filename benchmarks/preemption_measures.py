"""Issue 49's measures over the simulated week: today's policy against the new one.

*Today*: the queue orders by what tenants hold now, and a reclaimed cluster is warned
``reclaim_grace`` (15 min) before it is suspended, a warning runs do not act on; it
queues again at the back of the line. *New*: usage-decayed fair share (half-life 7 days,
the decayed GPU-hours handed to the pass as the real pass reads them), preemption with
10 minutes' notice, runs that checkpoint on notice (stopped once saved) and, as issue 49
asks, the preempted run queued again in its original place in line; the last row is the
same but queued again at the back. Two scenes, each replayed per seed: the ten-tenant
week of :mod:`benchmarks.scheduling` with its batch jobs and production gangs
checkpointing (:data:`clusters.whatif.workload.CHECKPOINTS`; dev clusters carry no
work), and :mod:`benchmarks.heavy_light`. Figures: :mod:`clusters.whatif.metrics`.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from datetime import timedelta

from benchmarks import heavy_light
from clusters.whatif.metrics import Figures, figures
from clusters.whatif.model import World
from clusters.whatif.simulator import simulate
from clusters.whatif.workload import LOAD, PARENT, large_fleet, synthetic_week, with_checkpoints

TODAY, NEW, NEW_BACK = "today", "new", "new, requeued at the back"
POLICIES = (TODAY, NEW, NEW_BACK)
HALF_LIFE = timedelta(hours=168)
NOTICE = timedelta(minutes=10)
TEN, TWO = "ten tenants", "heavy and light"
SCENES = (TEN, TWO)
# Goals of issue 49.
LOST_CUT, WEEKLY_FAIRNESS = 0.9, 0.95


def policy_world(world: World, policy: str) -> World:
    """``world`` under ``policy`` (see the module's docstring)."""
    if policy == TODAY:
        return world
    return replace(world, half_life=HALF_LIFE, notice=NOTICE, keep_place=policy == NEW)


def measure(scene: str, policy: str, seed: int, days: float) -> tuple[Figures, float]:
    """One replay's figures and its wall time in seconds."""
    if scene == TEN:
        base = large_fleet(parent=PARENT)
        workload = with_checkpoints(
            synthetic_week(base, seed=seed, load=LOAD, seconds=days * 86400)
        )
    else:
        base = heavy_light.world()
        workload = heavy_light.week(seed=seed, seconds=days * 86400)
    world = policy_world(base, policy)
    began = time.perf_counter()
    outcome = simulate(world, workload)
    return figures(world, outcome), time.perf_counter() - began


def _med(values: list[float]) -> float:
    return statistics.median(values)


def _fmt(v: float | None, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def preemption_run(days: float, seeds: list[int], *, workers: int = 2) -> str:
    """The markdown subsection: per scene and policy, medians over ``seeds``."""
    jobs = [(s, p, seed) for s in SCENES for p in POLICIES for seed in seeds]
    began = time.perf_counter()
    if workers <= 1:
        done = [measure(s, p, seed, days) for s, p, seed in jobs]
    else:
        # fork: the children inherit the loaded code; the replays are pure.
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = [pool.submit(measure, s, p, seed, days) for s, p, seed in jobs]
            done = [f.result() for f in futures]
    wall = time.perf_counter() - began
    runs: dict[tuple[str, str], list[tuple[Figures, float]]] = {}
    for (s, p, _), result in zip(jobs, done, strict=True):
        runs.setdefault((s, p), []).append(result)
    lines = [
        "### Preemption and fairness over the week (issue 49)",
        "",
        "Today's policy against the new one (clusters/whatif: `World.half_life`, "
        "`World.notice`, `Demand.checkpoint_every` and `save_seconds`): "
        f"*today* orders by GPUs held now and warns a reclaimed cluster "
        "15 min before suspending it, a warning runs do not act on; it queues again at "
        f"the back. *new*: usage-decayed fair share (half-life {HALF_LIFE.days} days), "
        f"{NOTICE.seconds // 60} min of notice, runs checkpoint on notice and are stopped "
        "once saved, and queue again in their original place in line (by submission "
        "time), as issue 49 asks; *new, requeued at the back*: the same, queued again as "
        "a new request. Runs that carry work checkpoint periodically (ten tenants: batch "
        "jobs every hour, 3 min to save; production gangs every 2 h, 5 min; dev clusters "
        "are interactive and carry none. Heavy and light: every gang every hour, 3 min): "
        "stopped without a checkpoint on notice, a run loses the work since its last "
        "periodic checkpoint (or its start), and does it again. Only clusters are "
        "reclaimed (jobs give their GPUs back when they end). *Weekly Jain*: Jain's index "
        "of GPU-hours received over each tenant's entitlement (its weight's part of what "
        "the week delivered, capped at what it asked for, the rest shared out by weight: "
        "clusters/whatif/fairness.py); *per-moment Jain*: the existing figure. Waits per "
        "tenant: median / p90. "
        f"{days:g} simulated days, seeds {', '.join(map(str, seeds))}, median of "
        f"{len(seeds)} (the most preemptions: the largest).",
        "",
        "| scene | policy | weekly Jain | per-moment Jain | GPU-h lost to preemption | "
        "preemptions per request (mean / most) | clusters reclaimed | mean wait | "
        "simulated in |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in SCENES:
        for p in POLICIES:
            rs = [f for f, _ in runs[s, p]]
            weekly = [f.weekly_jain for f in rs if f.weekly_jain is not None]
            moment = [f.jain for f in rs if f.jain is not None]
            lines.append(
                f"| {s} | {p} | {_fmt(_med(weekly) if weekly else None)} | "
                f"{_fmt(_med(moment) if moment else None)} | "
                f"{_med([f.lost_gpu_hours for f in rs]):,.0f} | "
                f"{_med([f.preemptions_mean for f in rs]):.2f} / "
                f"{max(f.preemptions_max for f in rs)} | "
                f"{_med([f.reclaims for f in rs]):,.0f} | "
                f"{_med([f.mean_wait for f in rs]) / 60:.0f} min | "
                f"{_med([t for _, t in runs[s, p]]):.0f} s |"
            )
    lines += ["", "Waits per tenant, median / p90 (median over the seeds):", ""]
    for s in SCENES:
        for p in POLICIES:
            rs = [f for f, _ in runs[s, p]]
            tenants = sorted({t.tenant for f in rs for t in f.tenants})
            parts = []
            for slug in tenants:
                ts = [t for f in rs for t in f.tenants if t.tenant == slug]
                parts.append(
                    f"{slug} {_med([t.median_wait for t in ts]) / 60:.0f} min / "
                    f"{_med([t.p90_wait for t in ts]) / 3600:.1f} h"
                )
            lines.append(f"- {s}, {p}: " + "; ".join(parts) + ".")
    lines += [
        "",
        _verdicts(runs),
        "",
        f"All {len(jobs)} replays took {wall:.0f} s of wall time in {workers} processes.",
    ]
    return "\n".join(lines)


def _verdicts(runs: dict[tuple[str, str], list[tuple[Figures, float]]]) -> str:
    """The goals, per scene, for the new policy and its requeued-at-the-back variant."""
    out = []
    for s in SCENES:
        before = _med([f.lost_gpu_hours for f, _ in runs[s, TODAY]])
        for p in (NEW, NEW_BACK):
            after = _med([f.lost_gpu_hours for f, _ in runs[s, p]])
            cut = 1 - after / before if before else None
            weekly = [f.weekly_jain for f, _ in runs[s, p] if f.weekly_jain is not None]
            wj = _med(weekly) if weekly else None
            out.append(
                f"{s}, {p}: lost GPU-hours cut by "
                f"{'-' if cut is None else f'{100 * cut:.0f}%'} (goal 90%: "
                f"{'met' if cut is not None and cut >= LOST_CUT else 'missed'}), weekly "
                f"fairness {_fmt(wj)} (goal 0.95: "
                f"{'met' if wj is not None and wj >= WEEKLY_FAIRNESS else 'missed'})"
            )
    return "Goals: " + "; ".join(out) + "."
