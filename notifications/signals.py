"""The kick: a notable ClusterEvent asks for a dispatch pass as soon as it commits.

Only events that may be notable kick (a cheap check on the row, no query), so the
reconciler's routine events cost nothing. Events written in bulk send no signal; the
beat entry finds them within ``NOTIFY_DISPATCH_INTERVAL_SECONDS``. A kick that is lost
only delays a notice.
"""

from __future__ import annotations

import logging
from typing import Any

from notifications import enqueue
from notifications.event_kinds import maybe_notable

log = logging.getLogger(__name__)


def kick_dispatcher(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    """``post_save`` receiver of ClusterEvent."""
    if kwargs.get("raw") or not created:
        return
    if maybe_notable(
        from_state=instance.from_state, to_state=instance.to_state, reason=instance.reason
    ):
        enqueue.dispatch_after_commit()
