"""Fair share, explained: nominal, used, borrowed and lent GPUs, the lending limit, the
weighted dominant share the queue orders by, and CPU and memory quotas that bind."""

from __future__ import annotations

from decimal import Decimal

from clusters.admission import QuotaQ, TenantQ
from clusters.admission.fairshare import fair_share, lent_by
from clusters.admission.ledger import Ledger
from clusters.admission.recorded_pass import RecordedPass
from tests.clusters.admission.helpers import pending, running, snapshot

QUOTAS = [
    QuotaQ("acme", "h100", 16, 0),
    QuotaQ("globex", "h100", 16, 8),
    QuotaQ("acme", "l4", 2, 0),
]
# acme uses 4 of its 16 H100s and both its L4s; globex borrows 8 beyond its 16.
HELD = [running(1, "acme", 4), running(2, "acme", 2, flavor="l4"), running(3, "globex", 24)]


def _rows(lend_limits: dict[tuple[str, str], int | None], **kw: object) -> dict[str, object]:
    snap = snapshot(running=kw.pop("running", HELD), quotas=kw.pop("quotas", QUOTAS), **kw)
    (cohort,) = fair_share(snap, lend_limits=lend_limits)
    return {t.tenant: t for t in cohort.tenants}


def test_borrowed_lent_and_the_dominant_share() -> None:
    tenants = _rows({})
    acme, globex = tenants["acme"], tenants["globex"]
    h100, l4 = acme.flavors  # type: ignore[attr-defined]
    assert (h100.nominal, h100.used, h100.borrowed, h100.lent) == (16, 4, 0, 8)
    assert (l4.nominal, l4.used, l4.borrowed, l4.lent) == (2, 2, 0, 0)
    (g,) = globex.flavors  # type: ignore[attr-defined]
    assert (g.nominal, g.borrow_limit, g.used, g.borrowed, g.lent) == (16, 8, 24, 8, 0)
    # 4/32 of the H100s, 2/4 of the L4s: the L4 share dominates; globex holds 24/32.
    assert (h100.share, l4.share) == (0.125, 0.5) and l4.dominant and not h100.dominant
    assert acme.share == 0.5 and globex.share == 0.75  # type: ignore[attr-defined]


def test_the_shares_are_the_ledgers_own() -> None:
    snap = snapshot(running=HELD, quotas=QUOTAS)
    (cohort,) = fair_share(snap, lend_limits={})
    ledger = Ledger(snap)
    assert {t.tenant: t.share for t in cohort.tenants} == dict(ledger.share)


def test_the_lending_limit_caps_what_is_lent() -> None:
    tenants = _rows({("acme", "h100"): 4})
    (h100, _) = tenants["acme"].flavors  # type: ignore[attr-defined]
    assert h100.lend_limit == 4 and h100.lent == 4


def test_what_borrowers_use_is_split_among_lenders_by_what_each_may_lend() -> None:
    quotas = [*QUOTAS, QuotaQ("initech", "h100", 8, 0)]
    tenants = [TenantQ("acme"), TenantQ("globex"), TenantQ("initech")]
    rows = _rows({}, quotas=quotas, tenants=tenants)
    # Borrowers use 8; acme may lend 12 and initech 8: 8 x 12/20 and 8 x 8/20.
    assert rows["acme"].flavors[0].lent == Decimal("4.80")  # type: ignore[attr-defined]
    assert rows["initech"].flavors[0].lent == Decimal("3.20")  # type: ignore[attr-defined]
    assert lent_by(Decimal(0), {"a": Decimal(3)}) == {"a": 0}
    assert lent_by(Decimal(9), {"a": Decimal(3), "b": Decimal(1)}) == {"a": 3, "b": 1}


def test_next_in_line_first() -> None:
    (cohort,) = fair_share(snapshot(running=HELD, quotas=QUOTAS), lend_limits={})
    assert [t.tenant for t in cohort.tenants] == ["acme", "globex"]


def test_a_cpu_quota_binds_when_a_waiting_request_waits_on_it() -> None:
    tenants = [TenantQ("acme", cpu_quota=10, memory_quota_gib=1000), TenantQ("globex")]
    snap = snapshot(
        tenants=tenants,
        running=[running(1, "acme", 1, cpu=Decimal(8), memory_gib=Decimal(10))],
        pending=[pending(5, "acme", 1, cpu=Decimal(4))],
    )
    recorded = RecordedPass(snap)
    assert recorded.pool_of == {5: ("tcpu", "acme")}
    (cohort,) = fair_share(snap, lend_limits={}, waiting_pools=recorded.pool_of)
    acme = next(t for t in cohort.tenants if t.tenant == "acme")
    cpu, memory = acme.resources
    assert (cpu.label, cpu.used, cpu.quota, cpu.binding) == ("CPU", 8, 10, True)
    assert (memory.label, memory.used, memory.quota, memory.binding) == ("memory", 10, 1000, False)
