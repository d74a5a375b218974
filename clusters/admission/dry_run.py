"""The dry-run: would this request start now, queue, or never fit — and what else would.

It runs the very same :func:`decide` on the snapshot with the candidate added, so that
its verdict cannot disagree with the next real pass on the same snapshot; only the
"never fits" checks come first, from the same :class:`Ledger` the pass uses. Given a
:class:`~clusters.admission.recorded.RecordedPass` of the snapshot, it forks the recorded
pass where the candidate would enter instead of running a whole pass per verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from clusters.admission.decide import decide
from clusters.admission.eta import format_eta
from clusters.admission.ledger import Ledger
from clusters.admission.snapshot import FlavorStanding, Pending, Snapshot

if TYPE_CHECKING:
    from clusters.admission.recorded import RecordedPass

FITS_NOW = "fits_now"
WILL_QUEUE = "will_queue"
NEVER_FITS = "never_fits"


@dataclass(frozen=True)
class VerdictReason:
    """A reason code (a queue reason or a never-fits code) and its plain message."""

    code: str
    message: str


@dataclass(frozen=True)
class Alternative:
    """The same request on another flavor, where it would start now or queue."""

    flavor: str
    verdict: str
    eta: datetime | None
    message: str


@dataclass(frozen=True)
class Verdict:
    """What the dry-run says. ``position``/``flavor_position``/``eta`` are set for
    ``will_queue``; ``summary`` reads like "1xL4 now, or 1xH100 in about 40 min"
    (with a multiplication sign)."""

    verdict: str
    reasons: list[VerdictReason] = field(default_factory=list)
    position: int | None = None
    flavor_position: int | None = None
    eta: datetime | None = None
    alternatives: list[Alternative] = field(default_factory=list)
    summary: str = ""
    # The flavor it would start on (``fits_now``); for a request that accepts several,
    # the first of them that fits now.
    flavor: str | None = None
    # ``will_queue`` for a request that accepts several flavors: its standing on each.
    flavors: tuple[FlavorStanding, ...] = ()


def _when(verdict: str, eta: datetime | None, now: datetime) -> str:
    if verdict == FITS_NOW:
        return "now"
    if eta is None:
        return "later (start time unknown)"
    return f"in {format_eta(eta, now)}"


def _label(p: Pending) -> str:
    return f"{p.workers}\N{MULTIPLICATION SIGN}{p.flavor.upper()}"


def _judge(snapshot: Snapshot, candidate: Pending, recorded: RecordedPass | None) -> Verdict:
    if recorded is not None:
        fast = recorded.judge(candidate)
        if fast is not None:
            return fast
    never = Ledger(snapshot).never_fits(candidate)
    if never:
        return Verdict(NEVER_FITS, [VerdictReason(code, message) for code, message in never])
    decision = decide(replace(snapshot, pending=[*snapshot.pending, candidate]))
    status = decision.waiting.get(candidate.id)
    if status is None:
        return Verdict(FITS_NOW, flavor=decision.placed.get(candidate.id, candidate.flavor))
    return Verdict(
        WILL_QUEUE,
        [VerdictReason(status.reason, status.message)],
        position=status.position,
        flavor_position=status.flavor_position,
        eta=status.eta,
        flavors=status.flavors,
    )


def dry_run(
    snapshot: Snapshot,
    candidate: Pending,
    alternatives: Sequence[Pending] = (),
    recorded: RecordedPass | None = None,
) -> Verdict:
    """Judge ``candidate`` against ``snapshot`` without changing anything.

    ``alternatives`` are the same request shaped for other flavors (the caller shapes
    them, since the shape rules live in ``clusters.shapes``); those that would not
    "never fit" are returned, soonest first, and named in the summary. ``recorded``, a
    :class:`~clusters.admission.recorded.RecordedPass` of ``snapshot``, answers without
    a whole pass per verdict where it can (with the same verdicts).
    """
    main = _judge(snapshot, candidate, recorded)
    now = snapshot.now
    never = datetime.max.replace(tzinfo=now.tzinfo)
    found: list[Alternative] = []
    # (sort time, order, message): the soonest option is named first.
    options: list[tuple[datetime, int, str]] = []
    if main.verdict != NEVER_FITS:
        start = now if main.verdict == FITS_NOW else (main.eta or never)
        label = _label(replace(candidate, flavor=main.flavor or candidate.flavor))
        if main.verdict != FITS_NOW and candidate.fallbacks:
            label = " or ".join(_label(o) for o in candidate.options())
        options.append((start, 0, f"{label} {_when(main.verdict, main.eta, now)}"))
    for alt in alternatives:
        judged = _judge(snapshot, alt, recorded)
        if judged.verdict == NEVER_FITS:
            continue
        message = f"{_label(alt)} {_when(judged.verdict, judged.eta, now)}"
        found.append(Alternative(alt.flavor, judged.verdict, judged.eta, message))
        start = now if judged.verdict == FITS_NOW else (judged.eta or never)
        options.append((start, len(options), message))
    found.sort(key=lambda a: now if a.verdict == FITS_NOW else (a.eta or never))
    options.sort()
    return replace(main, alternatives=found, summary=", or ".join(m for _, _, m in options))
