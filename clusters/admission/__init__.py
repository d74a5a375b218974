"""Admission and queue status, as pure functions over a snapshot.

``decide(snapshot)`` is one admission pass; ``dry_run(snapshot, candidate)`` says whether a
request would start now, queue, or never fit; ``format_eta`` renders an ETA. Nothing in
this package imports Django: the integrator builds a :class:`Snapshot` from the database
and writes the :class:`Decision` back.
"""

from clusters.admission.decide import decide
from clusters.admission.eta import format_eta
from clusters.admission.snapshot import (
    CAPACITY,
    COHORT_QUOTA,
    DEV,
    FLAVOR_UNKNOWN,
    GROWTH_IDS,
    HEAD_OF_LINE,
    NODE_SIZE,
    PROD,
    REASONS,
    RECLAIM_PENDING,
    TENANT_QUOTA,
    TENANT_TOTAL,
    USER_CAP,
    WAITING_FOR_NODES,
    Alternative,
    Decision,
    FlavorOption,
    FlavorQ,
    FlavorStanding,
    Parked,
    Pending,
    QueueStatus,
    QuotaQ,
    Reclaim,
    Running,
    Snapshot,
    TenantQ,
    Verdict,
    VerdictReason,
    cohort_root,
    extra_of,
)
from clusters.admission.verdict import dry_run

__all__ = [
    "CAPACITY",
    "COHORT_QUOTA",
    "DEV",
    "FLAVOR_UNKNOWN",
    "GROWTH_IDS",
    "HEAD_OF_LINE",
    "NODE_SIZE",
    "PROD",
    "REASONS",
    "RECLAIM_PENDING",
    "TENANT_QUOTA",
    "TENANT_TOTAL",
    "USER_CAP",
    "WAITING_FOR_NODES",
    "Alternative",
    "Decision",
    "FlavorOption",
    "FlavorQ",
    "FlavorStanding",
    "Parked",
    "Pending",
    "QueueStatus",
    "QuotaQ",
    "Reclaim",
    "Running",
    "Snapshot",
    "TenantQ",
    "Verdict",
    "VerdictReason",
    "cohort_root",
    "decide",
    "dry_run",
    "extra_of",
    "format_eta",
]
