"""Priority classes as the admission pass reads them (docs/preemption.md).

One query per pass reads every class; a request's class is then looked up by id, a
request without one taking the default class (value 0, no preemption, no protection
when there is no default row: the database may hold no class at all). A running
request's protection window is computed here from its row and its class, so that the
pure decision only compares times.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypedDict

from tenants.models import PriorityClass


@dataclass(frozen=True)
class ClassQ:
    """What admission needs of one priority class."""

    name: str = ""
    value: int = 0
    may_preempt: bool = False
    min_run_seconds: int = 0
    checkpoint_grace_seconds: int = 0
    notice_seconds: int | None = None


NO_CLASS = ClassQ()


class PendingClass(TypedDict):
    """A queued request's class fields on :class:`~clusters.admission.Pending`."""

    class_value: int
    class_name: str
    may_preempt: bool


class RunningClass(TypedDict):
    """A running request's class fields on :class:`~clusters.admission.Running`."""

    class_value: int
    class_name: str
    notice_seconds: float | None
    protected_until: datetime | None
    protected_by: str


@dataclass(frozen=True)
class Classes:
    """Every priority class by id, and the default class (:data:`NO_CLASS` if none)."""

    by_id: dict[int, ClassQ] = field(default_factory=dict)
    default: ClassQ = NO_CLASS

    @classmethod
    def of_one(cls, klass: PriorityClass | None) -> Classes:
        """Only ``klass`` (a request's own, already read), enough to look that request
        up without reading every class."""
        if klass is None:
            return cls()
        return cls({klass.pk: _class_q(klass)})

    def of(self, class_id: int | None) -> ClassQ:
        """The class of a request whose ``priority_class_id`` is ``class_id``."""
        if class_id is None:
            return self.default
        return self.by_id.get(class_id, self.default)

    def pending_fields(self, class_id: int | None) -> PendingClass:
        """A queued request's class fields on :class:`~clusters.admission.Pending`."""
        klass = self.of(class_id)
        return {
            "class_value": klass.value,
            "class_name": klass.name,
            "may_preempt": klass.may_preempt,
        }

    def running_fields(
        self,
        class_id: int | None,
        *,
        started: datetime | None,
        checkpointed_at: datetime | None,
    ) -> RunningClass:
        """A running request's class fields on :class:`~clusters.admission.Running`:
        its protection window ends ``min_run_seconds`` after it started (ready, else
        admitted) or ``checkpoint_grace_seconds`` after its last checkpoint, whichever
        is later."""
        klass = self.of(class_id)
        until: datetime | None = None
        by = ""
        if klass.min_run_seconds and started is not None:
            until, by = started + timedelta(seconds=klass.min_run_seconds), "min_run"
        if klass.checkpoint_grace_seconds and checkpointed_at is not None:
            grace_ends = checkpointed_at + timedelta(seconds=klass.checkpoint_grace_seconds)
            if until is None or grace_ends > until:
                until, by = grace_ends, "checkpoint"
        return {
            "class_value": klass.value,
            "class_name": klass.name,
            "notice_seconds": klass.notice_seconds,
            "protected_until": until,
            "protected_by": by,
        }


# The class columns admission reads, named as ClassQ's fields.
_FIELDS = (
    "name",
    "value",
    "may_preempt",
    "min_run_seconds",
    "checkpoint_grace_seconds",
    "notice_seconds",
)


def _class_q(klass: PriorityClass) -> ClassQ:
    return ClassQ(**{name: getattr(klass, name) for name in _FIELDS})


def read_classes() -> Classes:
    """Every priority class, in one query."""
    by_id: dict[int, ClassQ] = {}
    default = NO_CLASS
    for row in PriorityClass.objects.values("id", "is_default", *_FIELDS):
        klass = ClassQ(**{name: row[name] for name in _FIELDS})
        by_id[row["id"]] = klass
        if row["is_default"]:
            default = klass
    return Classes(by_id, default)
