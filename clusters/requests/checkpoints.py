"""Checkpoint reports and the notice a run reads (docs/preemption.md): one set of rules
for the owner's API and the token endpoint a driver polls without credentials.

A report records where the run saved its state; a job preempted afterwards resumes
from it (``GANGWAY_RESUME_FROM``). A report that lands after the job was already
requeued by a preemption still counts: its next run resumes from it.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from clusters.domain import preemption as pre
from clusters.domain.states import State
from clusters.models import ClusterRequest
from clusters.requests import rules
from clusters.rows import lifecycle
from clusters.rows.preemption import MAX_URI, record_checkpoint
from controlplane.exceptions import ServiceConflict

# ``scheme://rest`` (s3://, gs://, file://, sim://, ...) or an absolute path on storage
# the pods share; no spaces or control characters.
URI_RULE = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://[^\s]+|/[^\s]*)$")
URI_MESSAGE = (
    "uri must be a checkpoint's address: scheme://... (s3://, gs://, file://, ...) or an "
    f"absolute path, without spaces, at most {MAX_URI} characters."
)
ENDED = frozenset({State.SUCCEEDED, State.FAILED, State.STOPPED, State.DELETING, State.DELETED})


def validate_uri(value: Any) -> str:
    """The checkpoint URI as stored; ``ValidationError`` (``uri``) when it is not one."""
    if not isinstance(value, str) or not value or len(value) > MAX_URI:
        raise ValidationError({"uri": URI_MESSAGE})
    if not URI_RULE.match(value) or any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValidationError({"uri": URI_MESSAGE})
    return value


def report_checkpoint(
    *, actor: Any, cluster: ClusterRequest, uri: str, role: str | None = None
) -> ClusterRequest:
    """The owner (or a tenant admin) reports a checkpoint through the API."""
    if not rules.can_manage(actor=actor, cluster=cluster, role=role):
        raise PermissionDenied("Only the job's owner or a tenant admin may report its checkpoints.")
    return _record(cluster, validate_uri(uri), actor=actor)


def report_by_token(token: str, uri: Any) -> ClusterRequest | None:
    """A run reports a checkpoint with its token; None when the token is nobody's."""
    row = row_of_token(token)
    if row is None:
        return None
    return _record(row, validate_uri(uri))


def _record(cluster: ClusterRequest, uri: str, *, actor: Any = None) -> ClusterRequest:
    with transaction.atomic():
        row = lifecycle.locked(cluster)
        if row.state in ENDED:
            raise ServiceConflict(
                f"{row.name} has ended ({row.state}); there is no run to resume.",
                code="invalid_state",
            )
        record_checkpoint(row, uri, actor=actor)
        if row.state == State.QUEUED and row.preemptions:
            # Saved just before the preemption landed: the next run starts from it.
            ClusterRequest.objects.filter(pk=row.pk).update(resume_from=uri)
            row.resume_from = uri
    return row


def row_of_token(token: str) -> ClusterRequest | None:
    """The request a preemption token names (not deleted), or None."""
    pk = pre.request_of_token(token)
    if pk is None:
        return None
    return ClusterRequest.objects.unscoped().filter(pk=pk).exclude(state=State.DELETED).first()


def notice_of(row: ClusterRequest) -> dict[str, Any]:
    """What a run reads from the endpoint: whether it has notice, until when, why, the
    checkpoint its run resumes from and the last one it reported."""
    return {
        "notice": row.notice_at is not None and row.reclaim_after is not None,
        "deadline": _iso(row.reclaim_after if row.notice_at else None),
        "reason": row.notice_reason if row.notice_at else "",
        "resume_from": row.resume_from,
        "checkpoint_uri": row.checkpoint_uri,
        "checkpointed_at": _iso(row.checkpointed_at),
        "preemptions": row.preemptions,
        "state": row.state,
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
