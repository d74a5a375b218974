"""The dry-run: would this request start now, queue, or never fit — and what else would.

It runs the very same :func:`decide` on the snapshot with the candidate added, so that
its verdict cannot disagree with the next real pass on the same snapshot; only the
"never fits" checks come first, from the same :class:`Ledger` the pass uses. Given a
:class:`~clusters.admission.recorded_pass.RecordedPass` of the snapshot, it forks the recorded
pass where the candidate would enter instead of running a whole pass per verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from clusters.admission import verdict_text as text
from clusters.admission.decide import decide
from clusters.admission.ledger import Ledger
from clusters.admission.recorded_pass import RecordedPass
from clusters.admission.snapshot import (
    FITS_NOW,
    NEVER_FITS,
    WILL_QUEUE,
    Alternative,
    Pending,
    Snapshot,
    Verdict,
    VerdictReason,
)


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
        return Verdict(
            FITS_NOW,
            flavor=decision.placed.get(candidate.id, candidate.flavor),
            kube_cluster=decision.clusters.get(candidate.id),
            placement=decision.placement_notes.get(candidate.id, ""),
        )
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
    them, since the shape rules live in ``clusters.domain.shapes``); those that would not
    "never fit" are returned, soonest first, and named in the summary. ``recorded``, a
    :class:`~clusters.admission.recorded_pass.RecordedPass` of ``snapshot``, answers without
    a whole pass per verdict where it can (with the same verdicts).
    """
    main = _judge(snapshot, candidate, recorded)
    now = snapshot.now
    never = datetime.max.replace(tzinfo=now.tzinfo)
    found: list[Alternative] = []
    # (sort time, order, choice): the soonest choice is named first.
    choices: list[tuple[datetime, int, str]] = []
    on = _placed(candidate, main)
    if main.verdict != NEVER_FITS:
        start = now if main.verdict == FITS_NOW else (main.eta or never)
        choices.append((start, 0, text.option(on, main.verdict, main.eta, now)))
    for alt in alternatives:
        judged = _judge(snapshot, alt, recorded)
        if judged.verdict == NEVER_FITS:
            continue
        message = text.alternative(alt, judged.verdict, judged.eta, now)
        found.append(Alternative(alt.flavor, judged.verdict, judged.eta, message))
        start = now if judged.verdict == FITS_NOW else (judged.eta or never)
        choices.append((start, len(choices), text.option([alt], judged.verdict, judged.eta, now)))
    found.sort(key=lambda a: now if a.verdict == FITS_NOW else (a.eta or never))
    choices.sort()
    return replace(
        main,
        alternatives=found,
        summary=text.summary([c for _, _, c in choices]),
        headline=text.headline(
            main.verdict,
            options=on,
            position=main.position,
            eta=main.eta,
            now=now,
            placement=main.placement,
        ),
    )


def _placed(candidate: Pending, verdict: Verdict) -> tuple[Pending, ...]:
    """The request as the verdict places it: on the flavor it would start on, or on
    every flavor it would wait on."""
    if verdict.verdict == FITS_NOW:
        flavor = verdict.flavor or candidate.flavor
        return tuple(o for o in candidate.options() if o.flavor == flavor) or (candidate,)
    return candidate.options()
