"""The registry of workload kinds: what the shared code may ask of a kind, and which
package answers for each ``ClusterRequest.workload`` value.

A kind's package (``clusters/kinds/<name>/``) describes itself in a :class:`Kind`, found
by :data:`KIND_MODULES`; what it does (manifests, converging and folding rows) sits in
its :attr:`Kind.engine` module. Both are imported by name on first use, so the shared
layers never import a kind. Adding a kind adds its package and a line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from clusters.domain.states import InvalidTransition, State

KIND_MODULES = (
    "clusters.kinds.raycluster.kind",
    "clusters.kinds.rayjob.kind",
    "clusters.kinds.rayservice.kind",
)
# What a drain of its member does to a running row (``Kind.drain``): send it back to the
# queue, to be placed on another member, or let it run to its end where it is.
REQUEUE = "requeue"
WAIT = "wait"
# The drain mode that requeues every kind (``clusters.models.DrainMode.REQUEUE``).
REQUEUE_ALL = "requeue"
# The ``workload`` of a request that names none (the model's default; lists without one).
DEFAULT_WORKLOAD = "cluster"


class Behaviour(Protocol):
    """What a kind's engine module answers; ``row`` is a ``ClusterRequest`` of the kind."""

    def manifests(self, row: Any, **options: Any) -> list[dict[str, Any]]: ...

    def apply(self, row: Any, gw: Any, *, bundles: Any = None) -> None: ...

    def converge(
        self,
        row: Any,
        gw: Any,
        *,
        bundles: Any = None,
        finish_deletion: bool = True,
    ) -> None: ...

    def wants_provisioning(self, row: Any) -> bool: ...

    def wants_object(self, state: str, backend: Any) -> bool: ...

    def needs_bundle(self, state: str) -> bool: ...

    def objects_stamp(self, seen: Any, key: tuple[str, str], pk: int) -> tuple[Any, ...]: ...

    def fold(self, row: Any, fold: Any) -> None: ...

    def orphan(self, obj: dict[str, Any]) -> bool: ...

    def delete_object(self, gw: Any, namespace: str, name: str) -> None: ...

    def deadline_seconds(self, row: Any) -> int | None: ...


@dataclass(frozen=True)
class Details:
    """A kind's own table beside the request row (one row per request, keyed by its id):
    what the shared queries read of it, so that they join it without naming it."""

    model: str  # dotted path of its model, whose primary key is the request's id
    relation: str = ""  # the row's accessor to it, where the ORM may follow one
    # Its columns a fold reads (``column IS NULL`` too): a change there re-folds the row.
    folded: tuple[str, ...] = ()
    # Its column naming the request a row runs on, when it runs on another's: such a row
    # takes no GPUs of its own and is not one of its owner's clusters.
    host: str = ""
    deadline: str = ""  # its column of the seconds a run may last once started

    @property
    def table(self) -> str:
        """Its database table."""
        return str(self._meta().db_table)

    @property
    def key(self) -> str:
        """Its column holding the request's id."""
        return str(self._meta().pk.column)

    def _meta(self) -> Any:
        module, _, name = self.model.rpartition(".")
        return getattr(importlib.import_module(module), name)._meta


@dataclass(frozen=True)
class Kind:
    """One workload kind as the shared code sees it."""

    workload: str  # the row's ``workload`` value
    api_version: str  # the object a row of this kind is folded from
    object_kind: str
    transitions: Mapping[State, frozenset[State]]
    releases: frozenset[State]  # states whose entry gives the GPUs back
    started: State  # where admission's applied objects move a row
    started_message: str  # said when Kueue admits it
    admitted_message: str  # said when the built-in queue admits it
    applied_message: str  # said when its applied objects move it to ``started``
    engine: str  # dotted path of its :class:`Behaviour` module
    noun: str = ""  # "cluster", "job": in messages (its ``workload`` unless given)
    section: str = ""  # its pages' segment of the dashboard's paths (the noun's plural)
    plural: str = ""  # its resource name in the API's paths (the object kind's plural)
    reclaimable: bool = False  # may be suspended to give quota back
    # May be given notice and stopped for a reclaim or a higher priority class, then
    # queued again (docs/preemption.md): a job resumes from its last checkpoint.
    preemptible: bool = False
    # An autoscaling row is charged at its guaranteed size (``min_workers``) and runs
    # beyond it only on growth the admission pass grants (borrowable, reclaimed by a
    # shrink): the kind asks for it (:class:`~clusters.models.Growth`).
    grows: bool = False
    interactive: bool = False  # has a Ray dashboard, is reclaimed when idle
    # Dotted path of its API viewset, routed under ``tenants/{slug}/<section>/`` (none: no API).
    api: str = ""
    # Dotted path of its own idle policy, run by the idle-reclaim pass: a callable taking
    # ``now=`` that gives idle rows' GPUs back and returns their names (none: no policy).
    idle_reclaim: str = ""
    # Where its object holds the RayCluster spec that nodes are asked for.
    ray_cluster_spec_at: tuple[str, ...] = ("spec",)
    # States whose entry ends a run: its owner is told the run finished (not that it failed).
    finished: frozenset[State] = frozenset()
    details: Details | None = None  # its own table, if it has one
    # What a drain of its member does to a running row of it (:data:`REQUEUE` or
    # :data:`WAIT`); a drain in mode :data:`REQUEUE_ALL` requeues every kind.
    drain: str = REQUEUE
    # The relations of its rows read with a row to converge it (its details' relation).
    related: tuple[str, ...] = ()
    # What a list of the kind's rows loads with them (``related`` unless given), prefetches.
    list_related: tuple[str, ...] = ()
    list_prefetch: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        noun = self.noun or self.workload
        related = self.related or (
            (self.details.relation,) if self.details and self.details.relation else ()
        )
        derived = {
            "noun": noun,
            "section": self.section or f"{noun}s",
            "plural": self.plural or f"{self.object_kind.lower()}s",
            "related": related,
            "list_related": self.list_related or related,
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)  # frozen: set once, as it is built

    @property
    def behaviour(self) -> Behaviour:
        """The kind's engine module (imported on first use)."""
        return cast(Behaviour, importlib.import_module(self.engine))

    def drain_action(self, mode: str) -> str:
        """What a drain in ``mode`` does to a running row of this kind."""
        return REQUEUE if mode == REQUEUE_ALL else self.drain

    def can_transition(self, current: str, target: str) -> bool:
        """Whether this kind's map allows ``current`` -> ``target``."""
        return State(target) in self.transitions.get(State(current), frozenset())

    def check_transition(self, current: str, target: str) -> None:
        """Raise :class:`InvalidTransition` unless ``current`` -> ``target`` is allowed."""
        if not self.can_transition(current, target):
            raise InvalidTransition(current, target)


_KINDS: dict[str, Kind] = {}
# What the shared code built from the registry (see derived), forgotten when it changes.
_DERIVED: dict[str, Any] = {}
T = TypeVar("T")


def kinds() -> dict[str, Kind]:
    """Every registered kind by its ``workload`` value, those of :data:`KIND_MODULES` first."""
    if not _KINDS:
        for name in KIND_MODULES:
            register(importlib.import_module(name).KIND)
    return _KINDS


def register(kind: Kind) -> None:
    """Add a kind (or replace the one of its ``workload`` value)."""
    _KINDS[kind.workload] = kind
    _DERIVED.clear()


def unregister(workload: str) -> None:
    """Forget a kind added by :func:`register` (tests)."""
    kinds().pop(workload, None)
    _DERIVED.clear()


def derived(name: str, build: Callable[[], T]) -> T:
    """What ``build`` makes of the registry (a query's SQL, say), built once per registry:
    for paths too hot to walk every kind on each call."""
    if name not in _DERIVED:
        _DERIVED[name] = build()
    return cast(T, _DERIVED[name])


def kind_named(workload: str) -> Kind:
    """The kind of a ``workload`` value."""
    return kinds()[workload]


def kind_of(row: Any) -> Kind:
    """The kind of a request row (or of anything with a ``workload``; without one, the
    first of :data:`KIND_MODULES`, as the model's default)."""
    every = kinds()
    workload = getattr(row, "workload", None)
    return every[workload] if workload else next(iter(every.values()))


def row_relations() -> tuple[str, ...]:
    """Every kind's :attr:`Kind.related`: what a query of rows of any kind loads with them."""
    return tuple(name for kind in kinds().values() for name in kind.related)


def details_tables() -> list[Details]:
    """Every kind's :attr:`Kind.details` (the kinds that have their own table)."""
    return [kind.details for kind in kinds().values() if kind.details is not None]


def deadline_paths() -> tuple[str, ...]:
    """The ORM paths from a row to its kind's run deadline, one per kind that has one."""
    return tuple(
        f"{d.relation}__{d.deadline}" for d in details_tables() if d.relation and d.deadline
    )


def idle_reclaimers() -> list[Callable[..., list[str]]]:
    """Every kind's :attr:`Kind.idle_reclaim` policy (imported on first use)."""
    found = []
    for kind in kinds().values():
        if kind.idle_reclaim:
            module, _, name = kind.idle_reclaim.rpartition(".")
            found.append(getattr(importlib.import_module(module), name))
    return found


def grows(workload: str) -> bool:
    """Whether rows of ``workload`` are charged at their guaranteed size (:attr:`Kind.grows`)."""
    return workload in kinds() and kinds()[workload].grows


def interactive_workloads() -> list[str]:
    """The ``workload`` values of the interactive kinds (a Ray dashboard, idle reclaim)."""
    return [kind.workload for kind in kinds().values() if kind.interactive]
