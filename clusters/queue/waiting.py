"""What a queued request waits for, read from its row: the one source of the reason and
message that the dashboard's lists and pages, the API's ``queue`` (and so the CLI) show.

A pass writes a waiting request's position, reason code and message on its row; a hold
(:mod:`clusters.requests.controls`) writes its own. Until a pass has looked at a new
request it has neither, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from clusters.admission.explain import reason_label
from clusters.domain.states import State
from clusters.models import ClusterRequest

# The code and message of a request no pass has looked at yet.
PENDING = "pending"
PENDING_MESSAGE = "waiting for the next admission pass"
HELD = "held"


@dataclass(frozen=True)
class Waiting:
    """Where a queued request stands: ``reason`` is the public code, ``words`` its label
    on pages, ``message`` the sentence that says why."""

    position: int | None
    flavor_position: int | None
    reason: str
    words: str
    message: str
    eta: datetime | None

    @property
    def looked_at(self) -> bool:
        """Whether a pass (or a hold) said why it waits."""
        return self.reason != PENDING


def waiting(row: ClusterRequest) -> Waiting | None:
    """Why ``row`` waits, or ``None`` when it is not queued. A held request is held
    whatever its row's queue fields say: passes do not look at it."""
    if row.state != State.QUEUED:
        return None
    if row.held_at is not None:
        message = row.queue_message if row.queue_reason == HELD else ""
        return Waiting(
            position=None,
            flavor_position=None,
            reason=HELD,
            words=reason_label(HELD),
            message=message or f"On hold: {row.hold_reason}".rstrip(": "),
            eta=None,
        )
    reason = row.queue_reason or PENDING
    return Waiting(
        position=row.queue_position,
        flavor_position=row.queue_flavor_position,
        reason=reason,
        words=reason_label(reason) if row.queue_reason else PENDING_MESSAGE,
        message=row.queue_message or PENDING_MESSAGE,
        eta=row.queue_eta,
    )
