"""Why a request waits, in the sentences an admission pass writes on it: over its
tenant's quota, waiting for its cohort's unused quota, over its owner's cap, behind a
request that reclaimed capacity is promised to, preempting lower classes, or waiting for
their protection windows to end. Another team's requests are never named."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from clusters.admission.caps import CapBreach
from clusters.admission.counts_in_words import count, number, plural
from clusters.admission.ledger import fmt
from clusters.admission.snapshot import Pending, Running
from clusters.admission.topology_room import level_word


def free_words(amount: Decimal | int, noun: str, what: str = "free") -> str:
    """``no h100 GPUs are free``, ``1 h100 GPU is free``, ``2 h100 nodes are entirely free``."""
    if amount <= 0:
        return f"no {plural(noun, 0)} are {what}"
    return f"{count(amount, noun)} {'is' if amount == 1 else 'are'} {what}"


def minutes_words(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 120 else f"{round(minutes / 60)} h"


def promised_message(who: str, flavor: str) -> str:
    return (
        f"Held behind {who}, for which {flavor} GPUs are being taken back from borrowing "
        "teams: what they free is promised to it, so it goes first."
    )


def quota_message(p: Pending, used: Decimal, nominal: int, borrow: int) -> str:
    """Why a request waits over its tenant's quota on its flavor, borrowing included."""
    may = f" and may borrow {borrow} more" if borrow else " and cannot borrow more"
    short = used + p.gpus - nominal - borrow
    verb = "is" if short == 1 else "are"
    return (
        f"{p.tenant} is using {fmt(used)} of its {count(nominal, p.flavor + ' GPU')}"
        f"{may}: {fmt(short)} more {verb} needed."
    )


def cohort_message(
    p: Pending, cohort: str, cohort_usage: Decimal, cohort_total: int, used: Decimal, nominal: int
) -> str:
    """Why a request waits for its cohort's unused quota."""
    unused = max(cohort_total - cohort_usage, Decimal(0))
    gpus = f"{p.flavor} GPU"
    if unused:
        left = (
            f"only {fmt(unused)} of the {cohort} cohort's "
            f"{count(cohort_total, gpus)} {'is' if unused == 1 else 'are'} unused"
        )
    elif cohort_total == 1:
        left = f"the {cohort} cohort's only {gpus} is in use"
    else:
        left = (
            f"the {cohort} cohort has no unused {plural(gpus, 0)} (all {cohort_total} are in use)"
        )
    lacking = used + p.gpus - nominal
    asks = (
        f"{p.tenant} would have to borrow {count(lacking, gpus)}"
        if lacking > 0
        # Within its own quota, but the borrowers' clusters cannot be reclaimed.
        else f"{p.tenant} is within its nominal {p.flavor} quota"
    )
    return f"{asks}, but {left}."


def cap_message(p: Pending, breach: CapBreach) -> str:
    """Why a waiting request is over its owner's cap, as the queue shows it."""
    if breach.limit == "clusters":
        return (
            f"Its owner already runs {count(breach.clusters, 'dev cluster')} in {p.tenant}, "
            "the most one engineer may run at once."
        )
    return (
        f"Its owner already holds {count(breach.gpus, 'dev GPU')} in {p.tenant}; with "
        f"{fmt(p.gpus)} more they would pass the limit of {breach.cap} per engineer."
    )


def domain_message(p: Pending, level: str, most: int) -> str:
    """Why a gang that requires one domain of ``level`` waits though the flavor has
    whole free nodes enough: no single domain has them all."""
    word = level_word(level)
    return (
        f"No room in one {word}: this cluster needs {count(p.workers, 'whole node')} in one "
        f"{word} ({level}); the emptiest {word} has {number(most)} free."
    )


def domain_reclaim_message(p: Pending, cohort: str, level: str, most: int) -> str:
    """Why a gang that requires one domain of ``level`` waits within its nominal quota
    while borrowers hold it: suspending them would free no single domain for it."""
    word = level_word(level)
    return (
        f"{p.tenant} is within its nominal {p.flavor} quota, but other teams of the "
        f"{cohort} cohort are borrowing it, and no {word} would hold this cluster's "
        f"{count(p.workers, 'whole node')} even with their clusters there suspended (at most "
        f"{number(most)} in one {word}), so none is reclaimed for it: it waits for nodes "
        f"to free in one {word} ({level})."
    )


def _whose(victim: Running, reader: str) -> str:
    """A running request as told to ``reader``'s tenant: by name when it is its own,
    else unnamed (another team's requests and names are not told: STYLE 3)."""
    if victim.tenant == reader:
        return victim.name or f"request {victim.id}"
    return "another team's request"


def protected_message(
    p: Pending, lead: str, victim: Running, now: datetime, notice: timedelta, why: str
) -> str:
    """Why a request waits although running requests may be stopped for it: those it
    could take are inside their protection window (docs/preemption.md). ``lead`` is what
    taking them is ("Reclaims", "Preempts"), ``victim`` the one whose window ends last
    among those it needs, ``notice`` how long they are then warned, ``why`` what the
    sentence after it says."""
    window = "checkpoint grace" if victim.protected_by == "checkpoint" else "minimum run time"
    until = victim.protected_until or now
    who = _whose(victim, p.tenant)
    ends = f"{who}'s {window} ends" if victim.tenant == p.tenant else f"the {window} of {who} ends"
    return (
        f"{lead} in {minutes_words(max((until - now).total_seconds(), 0))}, when {ends}; "
        f"it starts after their {minutes_words(notice.total_seconds())} notice. {why}"
    )


def preempting_message(p: Pending, notice: timedelta) -> str:
    """Why a request of a class that may preempt waits while it does (no other team's
    request is named)."""
    klass = f"the {p.class_name} class" if p.class_name else "its priority class"
    return (
        f"Running requests of lower priority classes are being preempted for it ({klass} "
        f"may preempt); they are stopped within {minutes_words(notice.total_seconds())}."
    )


def preempted_message(r: Running, p: Pending, notice: timedelta) -> str:
    """What the preempted request's owner is told (the preempting tenant is named, as a
    reclaim names the tenant it gives quota back to)."""
    mine = f"the {p.class_name} class" if p.class_name else "a higher priority class"
    theirs = f" (this one is {r.class_name})" if r.class_name else ""
    return (
        f"{p.tenant} needs these {r.flavor} GPUs for a request of {mine}, which may "
        f"preempt lower classes{theirs}. This request is stopped in "
        f"{minutes_words(notice.total_seconds())} (never deleted)."
    )
