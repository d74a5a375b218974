"""The smallest third workload kind, as a test fixture: its object is a ConfigMap.

It is registered through :func:`clusters.domain.workload_kinds.register` only; nothing
of the shared code names it. Its module is its own :class:`Behaviour`. Its own table
(:class:`ToyDetails`, a colour its ConfigMap carries) is a model of no installed app:
the test creates and drops it, and the shared code joins it only through its
:class:`Details`.
"""

from __future__ import annotations

from typing import Any

from django.apps.registry import Apps
from django.db import models

from clusters.domain.states import State
from clusters.domain.workload_kinds import Details, Kind
from clusters.engine.pass_state import Fold, Key, Seen
from clusters.kube import labels
from clusters.kube.bundles import apply_into

TOY_LABEL = "gangway.test/toy"


class ToyDetails(models.Model):
    """The toy's own row beside its request (same id): the colour of its ConfigMap."""

    request_id = models.BigIntegerField(primary_key=True)
    colour = models.CharField(max_length=16, default="grey")

    class Meta:
        app_label = "toy"
        apps = Apps()  # outside the project's registry: no migration, no relation
        db_table = "test_toy_details"

    def __str__(self) -> str:
        return f"toy {self.request_id}: {self.colour}"


KIND = Kind(
    workload="toy",
    api_version="v1",
    object_kind="ConfigMap",
    transitions={
        State.QUEUED: frozenset({State.ADMITTED, State.DELETING}),
        State.ADMITTED: frozenset({State.PROVISIONING, State.DELETING}),
        State.PROVISIONING: frozenset({State.READY, State.DELETING}),
        State.READY: frozenset({State.DELETING}),
        State.DELETING: frozenset({State.DELETED}),
        State.DELETED: frozenset(),
    },
    releases=frozenset({State.QUEUED, State.DELETED}),
    started=State.PROVISIONING,
    started_message="its ConfigMap is written",
    admitted_message="writing its ConfigMap",
    applied_message="written",
    engine=__name__,
    details=Details(model=f"{__name__}.ToyDetails", folded=("colour",)),
)


def colour(row: Any) -> str:
    """The colour its details ask for (the default before it has any)."""
    details = ToyDetails.objects.filter(pk=row.pk).first()
    return details.colour if details is not None else "grey"


def manifests(row: Any, **options: Any) -> list[dict[str, Any]]:
    """One ConfigMap named as the row, labelled as every managed object plus a toy label."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": str(row.name),
                "namespace": str(row.tenant.namespace),
                "labels": {**labels.cluster_labels(row), TOY_LABEL: "1"},
            },
            "data": {"workers": str(row.workers), "colour": colour(row)},
        }
    ]


def apply(row: Any, gw: Any, *, bundles: Any = None) -> None:
    apply_into(row.tenant, gw, manifests(row), bundles=bundles)


def delete_object(gw: Any, namespace: str, name: str) -> None:
    gw.delete("v1", "ConfigMap", name, namespace)


def converge(
    row: Any,
    gw: Any,
    *,
    bundles: Any = None,
    finish_deletion: bool = True,
) -> None:
    if row.state in (State.PROVISIONING, State.READY):
        apply(row, gw, bundles=bundles)
    elif row.state == State.DELETING:
        delete_object(gw, row.namespace, row.name)


def wants_provisioning(row: Any) -> bool:
    return row.state not in (State.QUEUED, State.DELETED)


def wants_object(state: str, backend: Any) -> bool:
    return state != State.QUEUED


def needs_bundle(state: str) -> bool:
    return state != State.QUEUED


def objects_stamp(seen: Seen, key: Key, pk: int) -> tuple[Any, ...]:
    obj = seen.object("ConfigMap", key)
    return (obj["metadata"]["resourceVersion"] if obj is not None else None,)


def fold(row: Any, fold: Fold) -> None:
    """Ready once its ConfigMap is there (in its details' colour); deleted once it is gone."""
    obj = fold.seen.object("ConfigMap", fold.key)
    batch = fold.report.batch
    if row.state == State.DELETING:
        if obj is not None and not obj["metadata"].get("deletionTimestamp"):
            delete_object(fold.gw, row.namespace, row.name)
        elif obj is None:
            batch.to_delete[row.deletion_reason or "deleted"].append(row)
    elif row.state in (State.PROVISIONING, State.READY) and obj is None:
        apply(row, fold.gw)
        fold.report.recreated.append(row.pk)
    elif row.state in (State.PROVISIONING, State.READY):
        if (obj.get("data") or {}).get("colour") != colour(row):
            apply(row, fold.gw)  # its details changed since it was written
        if row.state == State.PROVISIONING:
            batch.to_ready.append(row)


def orphan(obj: dict[str, Any]) -> bool:
    """Only the toy's own ConfigMaps (the tenant bundle may hold managed ones)."""
    return (obj["metadata"].get("labels") or {}).get(TOY_LABEL) == "1"


def deadline_seconds(row: Any) -> int | None:
    return None
