"""Which borrowers' gangs to suspend for a gang that requires one topology domain.

Reclaim counts GPUs, but a gang that requires one domain of a level (docs/topology.md)
gains nothing from GPUs freed in several domains. So for it the victims are chosen in one
domain: the one where its whole free nodes plus the nodes of reclaimable borrowing gangs
pinned there (at the same level) reach the gang's workers, and their GPUs the deficit,
with the fewest GPUs reclaimed (ties by name). Within a domain, victims are taken in the
usual order (lowest priority, newest first). Where no domain can be freed, none is
reclaimed: suspending clusters elsewhere would not start the gang. Pure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from clusters.admission.snapshot import Running


@dataclass(frozen=True)
class DomainReclaim:
    """The domain chosen (``None``: no domain can be freed), the victims there and the
    GPUs they free; ``most``: the most nodes any domain would have, free or freed."""

    domain: str | None
    victims: tuple[Running, ...] = ()
    gpus: Decimal = Decimal(0)
    most: int = 0


def free_a_domain(
    candidates: Sequence[Running],
    free: Mapping[str, int],
    *,
    level: str,
    workers: int,
    deficit: Decimal,
    borrowed: Callable[[Running], Decimal],
) -> DomainReclaim:
    """The cheapest domain of ``level`` to free for a gang of ``workers`` whole nodes.

    ``candidates``: reclaimable clusters of borrowing tenants, in victim order; ``free``:
    whole free nodes per domain of ``level``; ``deficit``: the GPUs the cohort lacks;
    ``borrowed``: how many GPUs a candidate's tenant borrows (none left: not a victim)."""
    pinned: dict[str, list[Running]] = defaultdict(list)
    for r in candidates:
        if r.topology_level == level and r.topology_domain and r.nodes:
            pinned[r.topology_domain].append(r)
    best: DomainReclaim | None = None
    most = 0
    for domain in sorted(set(free) | set(pinned)):
        nodes = free.get(domain, 0)
        chosen: list[Running] = []
        gpus = Decimal(0)
        taken: dict[str, Decimal] = defaultdict(Decimal)
        for r in pinned[domain]:
            if nodes >= workers and gpus >= deficit:
                break
            if borrowed(r) - taken[r.tenant] <= 0:
                continue
            chosen.append(r)
            taken[r.tenant] += r.gpus
            nodes += r.nodes
            gpus += r.gpus
        most = max(most, nodes)
        if nodes >= workers and gpus >= deficit and (best is None or gpus < best.gpus):
            best = DomainReclaim(domain, tuple(chosen), gpus)
    if best is None:
        return DomainReclaim(None, most=most)
    return DomainReclaim(best.domain, best.victims, best.gpus, most)
