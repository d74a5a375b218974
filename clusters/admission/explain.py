"""Why a waiting request stands where it does, in words a person reads.

:func:`order_notes` compares each waiting request of a
:class:`~clusters.admission.recorded_pass.RecordedPass` with the nearest request of another
tenant ahead of it in the flavor's queue, on the very heap keys the pass popped them by,
and names the first that differs, so the sentence is true to the pass's order: "speech is
ahead: its weighted share is 0.21, vision's is 0.48." :func:`reason_label` puts the public
``queue.reason`` codes into the words pages show. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from clusters.admission.decayed_usage import RecentUsage, half_life_words
from clusters.admission.queue_order import HeadKey
from clusters.admission.recorded_pass import RecordedPass
from clusters.admission.snapshot import (
    CAPACITY,
    COHORT_QUOTA,
    HEAD_OF_LINE,
    RECLAIM_PENDING,
    TENANT_QUOTA,
    USER_CAP,
    WAITING_FOR_NODES,
    Pending,
)

REASON_LABELS = {
    TENANT_QUOTA: "team quota used up",
    COHORT_QUOTA: "nothing left to borrow in the cohort",
    CAPACITY: "no room on the fleet",
    USER_CAP: "per-engineer limit",
    HEAD_OF_LINE: "behind an older request",
    RECLAIM_PENDING: "quota being taken back for it",
    WAITING_FOR_NODES: "waiting for new nodes",
    # Set by a tenant admin's hold (clusters.requests.controls), never by a pass.
    "held": "on hold by an admin",
}

# How a tenant the viewer may not see is called (STYLE 3: a page never names it).
ANOTHER_TEAM = "another team"


def reason_label(code: str) -> str:
    """The words for a ``queue.reason`` code (an unknown code: its words, no underscores)."""
    return REASON_LABELS.get(code, code.replace("_", " "))


@dataclass(frozen=True)
class _Seen:
    """A waiting request already passed on one flavor's queue, with its heap key."""

    item: Pending
    key: HeadKey


def _share(value: float, other: float) -> str:
    """A share with two decimals, or four when two would show two different shares alike."""
    text = f"{value:.2f}"
    return f"{value:.4f}" if text == f"{other:.2f}" and value != other else text


def _class(p: Pending) -> str:
    """A request's priority class in a sentence: its name, else its value."""
    return p.class_name or f"class {p.class_value}"


def _minutes(aging: timedelta) -> str:
    minutes = round(aging.total_seconds() / 60)
    return f"{minutes} min" if minutes < 120 else f"{round(minutes / 60)} h"


def explain_pair(
    ahead: Pending,
    ahead_key: HeadKey,
    behind: Pending,
    behind_key: HeadKey,
    *,
    aging: timedelta,
    name: Callable[[str], str] = str,
    recent: RecentUsage | None = None,
) -> str:
    """Why ``ahead`` (another tenant's) comes before ``behind`` in a flavor's queue, from
    the heap keys the pass popped them by; ``name`` says how a tenant is called."""
    who, mine = name(ahead.tenant), name(behind.tenant)
    lead = f"{who[:1].upper()}{who[1:]} is ahead"
    if not ahead_key < behind_key:
        # ``behind`` entered the heap only once its own tenant's earlier request was
        # decided, after ``ahead`` had gone.
        return (
            f"{lead}: it went first while {mine}'s earlier requests were still ahead of this one."
        )
    klass, priority, aged, share, *_ = ahead_key
    b_klass, b_priority, b_aged, b_share, *_ = behind_key
    if klass != b_klass and ahead.class_value != behind.class_value:
        return f"{lead}: its priority class is higher ({_class(ahead)} vs {_class(behind)})."
    if klass != b_klass:
        return f"{lead}: production requests go before dev ones."
    if priority != b_priority:
        return f"{lead}: higher priority ({-priority} vs {-b_priority})."
    if aged != b_aged:
        if ahead.earmarked:
            return (
                f"{lead}: GPUs are being taken back from borrowing teams for it, so it goes first."
            )
        return f"{lead}: it has waited longer than {_minutes(aging)}, so it now goes first."
    if aged == 0:
        return f"{lead}: both have waited longer than {_minutes(aging)}; it asked earlier."
    if share != b_share:
        if recent is not None and recent.on:
            return recent_usage_note(lead, mine, behind.tenant, share, b_share, recent)
        return (
            f"{lead}: its weighted share is {_share(share, b_share)}, "
            f"{mine}'s is {_share(b_share, share)}."
        )
    return f"{lead}: same priority and weighted share, asked earlier."


def recent_usage_note(
    lead: str, mine: str, slug: str, share: float, b_share: float, recent: RecentUsage
) -> str:
    """The share sentence with usage-decayed fair share on: how much the waiting
    request's own tenant (``slug``, called ``mine``) used recently and what it does to
    its share. Only its own tenant's GPU-hours are told (another team's stay unnamed)."""
    hours = recent.tenant_hours(slug)
    half_life = half_life_words(recent.half_life) if recent.half_life is not None else ""
    used = (
        f"{mine} used {hours:,.0f} GPU-hours in the last weeks (half-life {half_life})"
        if hours >= 1
        else f"{mine} used next to no GPUs recently (half-life {half_life})"
    )
    return (
        f"{lead}: {used}; with what it holds now its weighted share is "
        f"{_share(b_share, share)}, above the {_share(share, b_share)} of the team ahead, "
        f"so {mine}'s requests go after it."
    )


def order_notes(recorded: RecordedPass, *, viewer: str | None = None) -> dict[int, str]:
    """For each waiting request of ``recorded``, why the nearest request of another tenant
    ahead of it in its (first) flavor's queue goes first; none for a request with no other
    tenant's ahead. ``viewer``: the tenant whose page it is; other tenants are then
    :data:`ANOTHER_TEAM` (``None``: a platform admin, who sees every name).

    Linear in the pass: per flavor, the last waiting request and the last one of a tenant
    other than that one's are the only candidates.
    """

    def name(slug: str) -> str:
        return slug if viewer is None or slug == viewer else ANOTHER_TEAM

    aging = recorded.snap.aging
    recent = recorded.snap.recent
    last: dict[str, _Seen] = {}
    last_other: dict[str, _Seen] = {}
    notes: dict[int, str] = {}
    for key, item in zip(recorded.keys, recorded.items, strict=True):
        if item.id not in recorded.pool_of:
            continue  # admitted by the pass: in no queue
        for option_index, option in enumerate(item.options()):
            flavor = option.flavor
            seen = _Seen(item, key)
            previous = last.get(flavor)
            ahead = previous
            if previous is not None and previous.item.tenant == item.tenant:
                ahead = last_other.get(flavor)
            if option_index == 0 and ahead is not None:
                notes[item.id] = explain_pair(
                    ahead.item, ahead.key, item, key, aging=aging, name=name, recent=recent
                )
            if previous is not None and previous.item.tenant != item.tenant:
                last_other[flavor] = previous
            last[flavor] = seen
    return notes
