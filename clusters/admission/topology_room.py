"""Whole free nodes per topology domain, for one flavor (or one member's stock of it).

A production gang that asks for a level of its flavor's topology ``required`` is admitted
only into one domain of that level with a whole free node for each worker; ``preferred``
gets such a domain when one exists. The domain is chosen by best fit: the one with the
fewest free nodes that still holds the gang (ties by name), so that large domains stay
whole for large gangs. A production gang that asks no level is *packed* the same way at
the flavor's :func:`packing_level`, so that it fills partly used domains before it breaks
whole ones (its workers only prefer the domain). A free node is known by its label value
at every level, coarse to fine, so charging it lowers every domain it is in, parents
included. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from clusters.admission.snapshot import PROD, Pending

REQUIRED = "required"
PREFERRED = "preferred"
# A level of single nodes: packing there would pin nothing worth keeping whole.
HOSTNAME = "kubernetes.io/hostname"

# A free node: its label value at each level of the flavor's topology ("" unlabelled).
Node = tuple[str, ...]


def wish(p: Pending) -> tuple[str, str] | None:
    """``p``'s (level, mode) when it asks to keep its workers in one domain."""
    if p.kind != PROD or not p.topology_level:
        return None
    return p.topology_level, p.topology_mode or REQUIRED


def packing_level(levels: Sequence[str]) -> str:
    """The level a production gang that asks none is packed at: the finest of the
    flavor's ``levels`` above single nodes ("": the flavor has none)."""
    return next((level for level in reversed(levels) if level != HOSTNAME), "")


def placement_level(p: Pending, levels: Sequence[str]) -> str | None:
    """The level ``p``'s nodes are chosen at: the one it asks for, else, for a production
    gang, the flavor's :func:`packing_level` (``None``: neither)."""
    asked = wish(p)
    if asked is not None:
        return asked[0]
    if p.kind == PROD:
        return packing_level(levels) or None
    return None


def level_word(level: str) -> str:
    """A level in a sentence: its key's last path segment (``rack`` for
    ``network.topology.kubernetes.io/rack``)."""
    return level.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Fit:
    """Where a gang fits at one level: the best-fitting ``domain`` (``None``: none holds
    it) and the most whole free nodes any one domain has."""

    domain: str | None
    most: int


class FreeNodes:
    """The whole free nodes of a flavor, each by its domains (mutable, for one pass)."""

    def __init__(self, levels: tuple[str, ...], nodes: Iterable[Node]) -> None:
        self.levels = levels
        self.nodes: Counter[Node] = Counter(n for n in nodes if len(n) == len(levels))

    def fork(self) -> FreeNodes:
        """A copy that changes apart from this one."""
        other = FreeNodes(self.levels, ())
        other.nodes = Counter(self.nodes)
        return other

    @property
    def total(self) -> int:
        return sum(self.nodes.values())

    def per_domain(self, index: int) -> Counter[str]:
        """Free nodes per domain of the level at ``index`` (unlabelled nodes in none)."""
        out: Counter[str] = Counter()
        for node, n in self.nodes.items():
            if n > 0 and node[index]:
                out[node[index]] += n
        return out

    def fit(self, level: str, workers: int) -> Fit | None:
        """The best-fitting domain of ``level`` for ``workers`` nodes (``None``: the
        level is not one of the flavor's, so it is not checked)."""
        if level not in self.levels:
            return None
        room = self.per_domain(self.levels.index(level))
        fitting = [(n, name) for name, n in room.items() if n >= workers]
        return Fit(min(fitting)[1] if fitting else None, max(room.values(), default=0))

    def take(self, level: str, domain: str, workers: int) -> None:
        """Charge ``workers`` free nodes of ``domain``: within it, those of the fullest
        finer domains first (best fit again, so that the emptiest stay whole)."""
        index = self.levels.index(level)
        for _ in range(workers):
            inside = [node for node, n in self.nodes.items() if node[index] == domain]
            if not inside:
                return
            self._drop(min(inside, key=self._fullness()))

    def take_anywhere(self, count: int) -> None:
        """Charge ``count`` free nodes whose place is not known (a gang without a domain,
        a dev worker on a whole free node): from the emptiest finest domains, so that
        what the pass believes is left never exceeds what is."""
        for _ in range(count):
            if not self.nodes:
                return
            self._drop(max(self.nodes, key=self._fullness()))

    def shrink_to(self, count: int) -> None:
        """Keep at most ``count`` free nodes (the ledger's whole free nodes)."""
        self.take_anywhere(max(self.total - count, 0))

    def _fullness(self) -> Callable[[Node], tuple[tuple[int, ...], Node]]:
        """The order to charge nodes in: by the free nodes of each of a node's domains,
        finest first (the smaller, the fuller), then by its names."""
        sizes = [self.per_domain(i) for i in range(len(self.levels))]

        def key(node: Node) -> tuple[tuple[int, ...], Node]:
            return tuple(sizes[i][node[i]] for i in reversed(range(len(node)))), node

        return key

    def _drop(self, node: Node) -> None:
        self.nodes[node] -= 1
        if self.nodes[node] <= 0:
            del self.nodes[node]


def best_domain(room: FreeNodes | None, p: Pending) -> str | None:
    """The best-fitting domain in ``room`` for ``p``'s topology wish, or to pack it into
    when it asks none (``None``: a dev request, no domain known, or none holds it)."""
    if room is None:
        return None
    level = placement_level(p, room.levels)
    if level is None:
        return None
    fit = room.fit(level, p.workers)
    return fit.domain if fit is not None else None


def take_nodes(room: FreeNodes, p: Pending, domain: str | None, left: int | None) -> None:
    """Charge admitted ``p``'s whole nodes in ``room``: in ``domain`` when it is pinned
    or packed there, else where they fall is not known; then keep no more than the
    ``left`` whole free nodes the GPU counters allow (dev workers may land on free nodes
    too)."""
    level = placement_level(p, room.levels)
    if p.kind == PROD:
        if domain is not None and level is not None:
            room.take(level, domain, p.workers)
        else:
            room.take_anywhere(p.workers)
    if left is not None:
        room.shrink_to(left)
