"""Where a replay puts what the pass admits, node by node in each flavor's pool: dev on
the fullest node with room, prod on whole free nodes (so fragmentation shows). A prod
gang goes to the domain the decision pinned it to; one packed there without a level takes
that domain's nodes first, then any. Without a domain, or in a topology-blind run, it
takes the first whole free nodes in node order. Also the domains' free nodes the pass sees.
"""

from __future__ import annotations

from decimal import Decimal

from clusters.admission import PROD, FlavorQ
from clusters.admission.topology_room import packing_level
from clusters.whatif import node_domains
from clusters.whatif.model import Demand, World
from clusters.whatif.replay_state import NodePools, ReplayState


def fitted_domains(world: World, pools: NodePools) -> dict[str, node_domains.Domains]:
    """The world's node domains, one per node of each pool (:func:`node_domains.fitted`)."""
    levels = {pools.of[f.name]: len(f.topology) for f in world.flavors if f.topology}
    return {
        pool: node_domains.fitted(domains, pools.nodes[pool], levels.get(pool, 1))
        for pool, domains in world.node_domains.items()
        if pool in pools.nodes
    }


def gang_wish(st: ReplayState, d: Demand) -> tuple[str, str]:
    """The level and mode a production gang asks for: its own, else what the world's
    ``gang_topology`` requires of a multi-node gang on its first flavor (none: "")."""
    if d.kind != PROD:
        return "", ""
    if d.topology_level:
        return d.topology_level, d.topology_mode or "required"
    level = st.world.gang_topology.get(d.flavors[0], "") if d.workers > 1 else ""
    return level, "required" if level else ""


def free_node_domains(st: ReplayState, flavor: FlavorQ) -> node_domains.Domains | None:
    """Each whole free node's domains of ``flavor``'s topology, in node order (``None``:
    not shown to the pass: a blind run, or a flavor without a topology)."""
    pool = st.pools.of[flavor.name]
    domains = st.world.node_domains.get(pool)
    if not st.aware or not flavor.topology or domains is None:
        return None
    return node_domains.free_node_domains(domains, st.free[pool], st.pools.units[pool])


def pinned_level(st: ReplayState, flavor: FlavorQ, d: Demand) -> str:
    """The level of the domain a demand is pinned to: its wish's, else (a production
    gang that asks none, packed by the pass) the flavor's packing level."""
    return gang_wish(st, d)[0] or (packing_level(flavor.topology) if d.kind == PROD else "")


def nodes_in_domain(st: ReplayState, flavor: FlavorQ, level: str, domain: str) -> set[int] | None:
    """The nodes of ``flavor``'s pool in ``domain`` of ``level`` (``None``: anywhere)."""
    domains = st.world.node_domains.get(st.pools.of[flavor.name])
    if not domain or domains is None or level not in flavor.topology:
        return None
    return node_domains.nodes_in(domains, flavor.topology.index(level), domain)


def place(
    st: ReplayState, flavor: FlavorQ, demand: Demand, domain: str = ""
) -> list[tuple[int, Decimal]] | None:
    """Nodes for every worker (best fit; a prod worker a whole node, the first free ones
    in node order, within ``domain`` of the demand's topology level when given; a gang
    packed there without a level takes its nodes first, then any, as its preferred node
    affinity asks), or ``None``."""
    pool, scale = st.pools.of[flavor.name], st.pools.scale(flavor)
    within = nodes_in_domain(st, flavor, pinned_level(st, flavor, demand), domain)
    packed = not gang_wish(st, demand)[0]
    trial = list(st.free[pool])
    taken: list[tuple[int, Decimal]] = []
    per = demand.worker_gpus_on(flavor)
    for _ in range(demand.workers):
        fits = [(g, i) for i, g in enumerate(trial) if g >= per * scale]
        if demand.kind == PROD:
            fits = [(g, i) for g, i in fits if g == st.pools.units[pool]]
            if within is not None and packed:
                fits = [(g, i) for g, i in fits if i in within] or fits
            elif within is not None:
                fits = [(g, i) for g, i in fits if i in within]
        if not fits:
            return None
        _, index = min(fits)
        trial[index] -= per * scale
        taken.append((index, per))
    st.free[pool] = trial
    return taken


def stranded(st: ReplayState) -> dict[str, int]:
    """Per flavor with a topology, its pool's stranded whole free nodes
    (:func:`node_domains.stranded_nodes`)."""
    out: dict[str, int] = {}
    for f in st.world.flavors:
        pool = st.pools.of[f.name]
        domains = st.world.node_domains.get(pool)
        if f.topology and domains is not None:
            out[f.name] = node_domains.stranded_nodes(domains, st.free[pool], st.pools.units[pool])
    return out
