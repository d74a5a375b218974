"""What an interactive cluster answers the shared engine (clusters.kinds.raycluster.engine);
converge and fold run against kubesim in tests/clusters/engine/."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from clusters.domain.states import State
from clusters.kinds.raycluster import engine

pytestmark = pytest.mark.django_db

BUILTIN = SimpleNamespace(provisions_queued=False, suspend_deletes=False)
KUEUE = SimpleNamespace(provisions_queued=True, suspend_deletes=True)


def test_which_states_want_a_raycluster_depends_on_the_queue() -> None:
    assert not engine.wants_object(State.QUEUED, BUILTIN)
    assert engine.wants_object(State.QUEUED, KUEUE)
    assert engine.wants_object(State.SUSPENDED, BUILTIN)
    assert not engine.wants_object(State.SUSPENDED, KUEUE)
    assert not engine.wants_object(State.FAILED, BUILTIN)


def test_a_raycluster_owned_by_another_object_is_not_an_orphan() -> None:
    owned = {"metadata": {"ownerReferences": [{"kind": "RayJob", "name": "train"}]}}
    assert not engine.orphan(owned)
    assert engine.orphan({"metadata": {}})


def test_a_queued_or_failed_row_asks_nothing_of_kubernetes(make_cluster: Any) -> None:
    assert not engine.wants_provisioning(make_cluster(state=State.FAILED))
    assert not engine.wants_provisioning(make_cluster(state=State.QUEUED))
    assert engine.wants_provisioning(make_cluster(state=State.READY))
    assert engine.deadline_seconds(make_cluster()) is None


def test_the_stamp_follows_the_raycluster_and_its_pods() -> None:
    seen = SimpleNamespace(
        object=lambda kind, key: {"metadata": {"resourceVersion": "7"}},
        pods={("ns", "c"): [{"metadata": {"resourceVersion": "3", "uid": "u"}}]},
        events={},
    )
    assert engine.objects_stamp(seen, ("ns", "c"), 1) == ("7", ("3",), ())  # type: ignore[arg-type]
