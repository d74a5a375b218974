"""Where a node pool's nodes sit in its flavor's topology, for the simulator: each node's
label values, coarse to fine (``World.node_domains``), and what the free room per node
(the simulator's ``free`` list, ``whole`` units a free node) says about them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from decimal import Decimal

from clusters.admission.topology_room import level_word

Domains = tuple[tuple[str, ...], ...]


def pool_domains(pool: str, nodes: int, levels: Sequence[tuple[str, int]]) -> Domains:
    """Each node's value at every ``(label key, nodes per domain)`` level, named as
    kubesim's fleet files name them (``h100-rack-3``: the fourth rack)."""
    named = [(level_word(key), size) for key, size in levels]
    return tuple(
        tuple(f"{pool}-{word}-{index // size}" for word, size in named) for index in range(nodes)
    )


def fitted(domains: Domains, nodes: int, levels: int) -> Domains:
    """``domains`` for a pool of ``nodes`` nodes: nodes added beyond those known (a
    what-if's ``nodes:h100=+8``) carry no labels (""), as unlabelled nodes would."""
    return tuple(domains[:nodes]) + (("",) * levels,) * max(nodes - len(domains), 0)


def free_node_domains(domains: Domains, free: Sequence[Decimal], whole: int) -> Domains:
    """The domains of every whole free node, in node order (``FlavorQ.free_node_domains``)."""
    return tuple(values for values, room in zip(domains, free, strict=True) if room == whole)


def nodes_in(domains: Domains, level: int, domain: str) -> set[int]:
    """The nodes whose value at the ``level``-th level is ``domain``."""
    return {index for index, values in enumerate(domains) if values[level] == domain}


def stranded_nodes(domains: Domains, free: Sequence[Decimal], whole: int) -> int:
    """Whole free nodes in domains of the finest level that have a node in use: free, yet
    no gang that requires a whole domain of that level can have them."""
    free_in: dict[str, int] = defaultdict(int)
    used: set[str] = set()
    for values, room in zip(domains, free, strict=True):
        if not values[-1]:
            continue  # an unlabelled node is in no domain
        if room == whole:
            free_in[values[-1]] += 1
        else:
            used.add(values[-1])
    return sum(n for domain, n in free_in.items() if domain in used)
