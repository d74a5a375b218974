"""The scheduling benchmark's topology run at a small size (one simulated day, one seed):
in the topology-aware run every multi-node production gang that requires a rack and
started sits in one rack (the one the decision pinned it to), no node is ever held by
two gangs when one of them is a whole-node gang, and the section has its two rows."""

from __future__ import annotations

from collections import defaultdict

from benchmarks.scheduling import AWARE, BLIND, topology_run
from clusters.admission import PROD
from clusters.whatif.replay_state import Outcome, Placement
from clusters.whatif.workload import RACK, large_fleet


def _overlaps(outcome: Outcome) -> list[tuple[int, int, int]]:
    """(node, holder, newcomer) for every placement onto an H100 node already held by a
    whole-node gang, or of a whole-node gang onto a node already held (dev gangs share)."""

    def whole(p: Placement) -> bool:
        return outcome.records[p.id].demand.kind == PROD

    events = []
    for p in outcome.placements:
        if p.flavor != "h100":
            continue
        events.append((p.start, 1, p))
        events.append((p.end if p.end is not None else outcome.seconds, 0, p))
    holders: dict[int, list[Placement]] = defaultdict(list)
    found = []
    # At one instant, what ends gives its nodes back before what starts takes them.
    for _, starts, p in sorted(events, key=lambda e: (e[0], e[1], e[2].id)):
        for node in set(p.nodes):
            if not starts:
                holders[node].remove(p)
                continue
            found.extend((node, q.id, p.id) for q in holders[node] if whole(p) or whole(q))
            holders[node].append(p)
    return found


def test_the_quick_topology_run_keeps_required_gangs_in_one_rack() -> None:
    section, runs = topology_run(1, [19])
    racks = [values[-1] for values in large_fleet().node_domains["h100"]]
    (aware,) = runs[AWARE]
    required = [
        p
        for p in aware.placements
        if aware.records[p.id].demand.topology_level == RACK and len(p.nodes) > 1
    ]
    assert required, "the day should start some multi-node gangs"
    for p in required:
        assert {racks[n] for n in p.nodes} == {p.domain}, p
    for label in (AWARE, BLIND):
        (outcome,) = runs[label]
        assert _overlaps(outcome) == []
        assert f"| {label} |" in section
    assert section.startswith("### Topology: whole-node gangs in one rack")
