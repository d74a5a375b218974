"""Scheduling quality over a simulated week: our policy against two baselines.

A seeded synthetic week (:mod:`clusters.whatif.workload`) is replayed by
:mod:`clusters.whatif.simulator` through the product's own admission pass under our policy,
strict FIFO on plain per-team quotas (no borrowing, no second flavor, no idle suspension),
and our policy without reclaim and idle suspension; each figure is the median over the
seeds, and our policy is replayed once more with the two cohorts isolated. Goals: allocation
while oversubscribed at least 95% and 10 points above FIFO, Jain's index at least 0.95. It
also times the what-if planner on a week (goal: under a minute).

Its topology run (:func:`topology_run`) replays the same weeks with every multi-node
production gang requiring one H100 rack, once with the pass seeing the racks
(topology-aware) and once without (topology-blind: gangs go to the first whole free
nodes in node order), and reports where the gangs sat, the fragmentation and the wait.
Its preemption run (:mod:`benchmarks.preemption_measures`) compares today's policy with
issue 49's (usage-decayed fair share, notice, checkpointing runs): weekly fairness, GPU-hours
lost to preemption, preemptions per request and waits per tenant.
"""

from __future__ import annotations

import os
import statistics
import time

from benchmarks.preemption_measures import preemption_run
from benchmarks.support import load_line
from clusters.admission import PROD
from clusters.whatif import services
from clusters.whatif.metrics import Figures, TopologyFigures, figures, topology_figures
from clusters.whatif.model import FIFO, MODES, NO_RECLAIM, POLICY, World
from clusters.whatif.replay_state import Outcome
from clusters.whatif.simulator import PASS_SECONDS, simulate
from clusters.whatif.workload import LOAD, PARENT, RACK, large_fleet, synthetic_week

LABELS = {
    POLICY: "our policy",
    FIFO: "strict FIFO, no borrowing",
    NO_RECLAIM: "our policy, no reclaim or idle suspension",
}


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _period() -> tuple[float, list[int]]:
    """The simulated days and the seeds (fewer of either make a quick check)."""
    days = float(os.environ.get("BENCH_SCHEDULING_DAYS", "7"))
    seeds = [int(s) for s in os.environ.get("BENCH_SCHEDULING_SEEDS", "19,20,21").split(",")]
    return days, seeds


def run() -> str:
    """Simulate the week per seed and mode; a markdown section of the medians, and the
    topology run's."""
    days, seeds = _period()
    topology, _ = topology_run(days, seeds)
    measures = preemption_run(days, seeds)
    return f"{quality_run(days, seeds)}\n\n{topology}\n\n{measures}\n\n{load_line()}"


def quality_run(days: float, seeds: list[int]) -> str:
    """Our policy against the baselines, per seed and mode (see the module's docstring)."""
    world = large_fleet(parent=PARENT)
    # The same week with the two cohorts isolated (no common parent), our policy only.
    isolated_world = large_fleet()
    isolated: list[Figures] = []
    results: dict[str, list[Figures]] = {m: [] for m in MODES}
    elapsed: dict[str, list[float]] = {m: [] for m in MODES}
    requests: list[int] = []
    for seed in seeds:
        workload = synthetic_week(world, seed=seed, load=LOAD, seconds=days * 86400)
        requests.append(len(workload.demands))
        for mode in MODES:
            began = time.perf_counter()
            outcome = simulate(world, workload, mode=mode)
            elapsed[mode].append(time.perf_counter() - began)
            results[mode].append(figures(world, outcome))
        isolated.append(figures(isolated_world, simulate(isolated_world, workload, mode=POLICY)))
    planner = _time_planner(world, seeds[0], days)
    rows = []
    medians: dict[str, dict[str, float | None]] = {}
    for mode in MODES:
        rs = results[mode]
        m = {
            "allocation": _median([r.allocation for r in rs]),
            "jain": _median([r.jain for r in rs]),
            "mean": _median([r.mean_wait for r in rs]),
            "p95": _median([r.p95_wait for r in rs]),
            "starved": _median([r.starved for r in rs]),
            "reclaimed": _median([r.idle_reclaimed_gpu_hours for r in rs]),
            "idle": _median([r.idle_gpu_hours for r in rs]),
            "over": _median([r.oversubscribed_hours for r in rs]),
            "seconds": statistics.median(elapsed[mode]),
        }
        medians[mode] = m
        rows.append(
            f"| {LABELS[mode]} | {_pct(m['allocation'])} | "
            f"{'-' if m['jain'] is None else format(m['jain'], '.3f')} | "
            f"{(m['mean'] or 0) / 60:.0f} min | {(m['p95'] or 0) / 3600:.1f} h | "
            f"{m['starved']:.0f} | {m['idle'] or 0:,.0f} | {m['reclaimed'] or 0:,.0f} | "
            f"{m['over'] or 0:.0f} h | {m['seconds']:.1f} s |"
        )
    ours, fifo = medians[POLICY]["allocation"], medians[FIFO]["allocation"]
    gap = (ours - fifo) * 100 if ours is not None and fifo is not None else None
    jain = medians[POLICY]["jain"]
    verdicts = [
        f"allocation {_pct(ours)} (goal 95%: {'met' if ours and ours >= 0.95 else 'missed'})",
        f"{'-' if gap is None else f'{gap:.1f}'} points above FIFO "
        f"(goal 10: {'met' if gap is not None and gap >= 10 else 'missed'})",
        f"Jain {'-' if jain is None else f'{jain:.3f}'} "
        f"(goal 0.95: {'met' if jain is not None and jain >= 0.95 else 'missed'})",
    ]
    apart = {
        "allocation": _median([r.allocation for r in isolated]),
        "jain": _median([r.jain for r in isolated]),
        "mean": _median([r.mean_wait for r in isolated]),
        "p95": _median([r.p95_wait for r in isolated]),
    }
    per_tenant = "; ".join(
        f"{t.tenant} {t.mean_wait / 60:.0f}/{t.p95_wait / 60:.0f} min"
        for t in results[POLICY][len(seeds) // 2].tenants
    )
    return "\n".join(
        [
            "## Scheduling quality over a simulated week",
            "",
            f"{days:g} simulated days on kubesim's large fleet (64 x 8 H100, 32 x 1 L4), ten "
            "tenants of weights 1-3 in two cohorts under one parent cohort "
            f"(`{PARENT}`: each cohort borrows what the other leaves unused and reclaims it "
            f"back), asking for {LOAD}x the fleet's GPU-hours "
            "in working hours and about 0.8x over the week (quiet nights and weekend: "
            f"clusters/whatif/workload.py); seeds {', '.join(map(str, seeds))} "
            f"(median of {len(seeds)}; {statistics.median(requests):,.0f} requests per run). "
            f"Replayed through `clusters.admission.decide` on a {PASS_SECONDS:.0f} s pass grid "
            "(docs/whatif.md says what is not modelled). Allocation: GPUs held over GPUs there "
            "are while a flavor's demand exceeds it; Jain: over the tenants waiting on a flavor, "
            "of their average GPUs held there per unit of weight.",
            "",
            "| policy | allocation while oversubscribed | Jain | mean wait | p95 wait | "
            "starved (>12 h) | idle GPU-h held | idle GPU-h given back | oversubscribed | "
            "simulated in |",
            "|---|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
            "Goals, our policy: " + "; ".join(verdicts) + ".",
            "",
            "The same weeks with the two cohorts isolated (no common parent, as Kueue cohorts "
            "without a parent are: neither lends to the other), our policy: allocation "
            f"{_pct(apart['allocation'])}, Jain "
            f"{'-' if apart['jain'] is None else format(apart['jain'], '.3f')}, mean wait "
            f"{(apart['mean'] or 0) / 60:.0f} min, p95 {(apart['p95'] or 0) / 3600:.1f} h. "
            "The GPUs one cohort leaves unused while the other queues are lost by "
            "configuration there: the allocation goal is met only with the common parent.",
            "",
            f"Mean/p95 wait per tenant under our policy (middle seed): {per_tenant}.",
            "",
            planner,
        ]
    )


# The two runs of the topology section: whether the pass sees the racks.
AWARE, BLIND = "topology-aware", "topology-blind"


def topology_run(days: float, seeds: list[int]) -> tuple[str, dict[str, list[Outcome]]]:
    """The weeks with multi-node production gangs requiring one H100 rack, placed
    topology-aware and topology-blind: a markdown subsection of the medians over the
    seeds, and the runs (for tests of where the gangs sat)."""
    world = large_fleet(parent=PARENT)
    runs: dict[str, list[Outcome]] = {AWARE: [], BLIND: []}
    found: dict[str, list[TopologyFigures]] = {AWARE: [], BLIND: []}
    for seed in seeds:
        workload = synthetic_week(
            world, seed=seed, load=LOAD, seconds=days * 86400, topology_level=RACK
        )
        for label in (AWARE, BLIND):
            outcome = simulate(world, workload, mode=POLICY, topology_aware=label == AWARE)
            runs[label].append(outcome)
            found[label].append(topology_figures(world, outcome, flavor="h100"))
    rows = []
    for label in (AWARE, BLIND):
        fs = found[label]
        share = _median([f.in_one_domain for f in fs])
        rows.append(
            f"| {label} | {statistics.median(f.gangs for f in fs):.0f} "
            f"({statistics.median(f.runs for f in fs):.0f}) | {_pct(share)} | "
            f"{statistics.median(f.stranded_nodes for f in fs):.1f} | "
            f"{statistics.median(f.median_wait for f in fs) / 60:.0f} min | "
            f"{statistics.median(f.p90_wait for f in fs) / 3600:.1f} h | "
            f"{statistics.median(f.unserved for f in fs):.0f} |"
        )
    gang_runs = [
        p for o in runs[AWARE] for p in o.placements if p.flavor == "h100" and len(p.nodes) > 1
    ]
    pinned = sum(1 for p in gang_runs if p.domain)
    singles = [
        p
        for o in runs[AWARE]
        for p in o.placements
        if p.flavor == "h100" and len(p.nodes) == 1 and o.records[p.id].demand.kind == PROD
    ]
    packed = sum(1 for p in singles if p.domain)
    aware_runs = sum(f.runs for f in found[AWARE])
    aware, blind = (
        {
            "share": _median([f.in_one_domain for f in found[label]]),
            "median": statistics.median(f.median_wait for f in found[label]),
            "p90": statistics.median(f.p90_wait for f in found[label]),
            "stranded": statistics.median(f.stranded_nodes for f in found[label]),
            "gangs": statistics.median(f.gangs for f in found[label]),
        }
        for label in (AWARE, BLIND)
    )
    section = "\n".join(
        [
            "### Topology: whole-node gangs in one rack",
            "",
            "The same weeks and policy, the H100 pool in 2 blocks of 4 racks of 8 nodes (as "
            "kubesim/fleets/large.yaml labels it), every production gang of more than one "
            f"node requiring one rack (`{RACK}`, docs/topology.md). *Topology-aware*: each "
            "pass sees the racks of the whole free nodes (`FlavorQ.free_node_domains`) and "
            "the gangs' wishes, and a gang the decision pins to a rack "
            "(`Decision.domains`) takes nodes there. *Topology-blind*: the pass sees "
            "neither, and a gang takes the first whole free nodes in node order, whatever "
            "rack they are in (the product before issue 48). *Gangs (runs)*: multi-node "
            "production gangs that started, and their runs (a reclaimed one starts again); "
            "*in one rack*: the share of the runs whose nodes all sat in one rack; "
            "*stranded*: whole free "
            "nodes in racks partly in use, which no gang requiring a whole rack can have "
            "(time-averaged over the period); waits are of the multi-node production "
            "gangs (one never started waited to the end), median over the seeds.",
            "",
            "| placement | gangs (runs) | in one rack | stranded free nodes | median wait | "
            "p90 wait | never started |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
            f"Over the seeds, the decision pinned {pinned} of the aware runs' {aware_runs} "
            "gang runs to a rack (`Decision.domains`; a run it did not pin would have been "
            f"placed by the blind rule), and packed {packed} of {len(singles)} single-node "
            "production runs, which ask no rack, into the fullest rack that had a whole "
            "free node (a preferred node affinity: they take its nodes first). A rack-bound "
            "gang within its quota that finds borrowers in the way has the borrowers' gangs "
            "of one rack reclaimed, the rack that then holds it (docs/topology.md).",
            "",
            f"Keeping the gangs in one rack ({_pct(blind['share'])} of runs blind, "
            f"{_pct(aware['share'])} aware) cost them "
            f"{(aware['median'] - blind['median']) / 3600:+.1f} h of median wait and "
            f"{(aware['p90'] - blind['p90']) / 3600:+.1f} h at p90, with "
            f"{aware['stranded'] - blind['stranded']:+.1f} stranded free nodes on average: "
            "a rack-bound gang waits while free nodes sit in racks that other work has "
            "partly taken. Packing keeps the single-node gangs out of whole racks; dev "
            "workers, best fit on the fullest node with room but without regard to racks, "
            "still break them. About "
            f"{blind['gangs']:.0f} multi-node gangs a seed: read the waits as a direction, "
            "not a precise cost.",
        ]
    )
    return section, runs


def _time_planner(world: World, seed: int, days: float) -> str:
    """The what-if planner's wall time on ``seed``'s period with eight more H100 nodes."""
    workload = synthetic_week(world, seed=seed, load=LOAD, seconds=days * 86400)
    changes = services.parse_changes(["nodes:h100=+8"])
    began = time.perf_counter()
    comparison = services.whatif_compare(world=world, workload=workload, changes=changes)
    wall = time.perf_counter() - began
    goal = "met" if wall < 60 else "missed"
    return (
        f"The what-if planner (`whatif_compare`, as `python manage.py whatif --synthetic "
        f"--days {days:g} --seed {seed} --change nodes:h100=+8` runs it: both worlds, the "
        f"changed one in a second process) took {wall:.1f} s of wall time for "
        f"{comparison.requests:,} requests over {days:g} days (goal for a week: under a "
        f"minute; {goal if days >= 7 else 'not a week'})."
    )
