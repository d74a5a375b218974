"""scheduling.k8s.io/v1 PriorityClass in kubesim, through the official client: served
and discoverable, and refused as kube-apiserver refuses it (no value, a value above one
billion, an unknown preemption policy, a reserved name, a value or policy changed)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException


@pytest.fixture
def scheduling(kube_api: client.ApiClient) -> client.SchedulingV1Api:
    return client.SchedulingV1Api(kube_api)


def _pc(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        **fields,
    }


def _refused(call: Any) -> str:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 422, caught.value.body
    return str(caught.value.body)


def test_priority_classes_are_stored_and_checked(scheduling: client.SchedulingV1Api) -> None:
    made = scheduling.create_priority_class(
        _pc("gangway-high", value=100, preemptionPolicy="Never", description="High.")
    )
    assert made.value == 100 and made.preemption_policy == "Never"
    listed = [pc.metadata.name for pc in scheduling.list_priority_class().items]
    assert "gangway-high" in listed

    assert "value" in _refused(lambda: scheduling.create_priority_class(_pc("no-value")))
    too_high = _refused(lambda: scheduling.create_priority_class(_pc("big", value=2_000_000_000)))
    assert "maximum allowed value of a user defined priority is 1000000000" in too_high
    policy = _refused(
        lambda: scheduling.create_priority_class(_pc("odd", value=1, preemptionPolicy="Always"))
    )
    assert "Unsupported value" in policy
    reserved = _refused(lambda: scheduling.create_priority_class(_pc("system-mine", value=1)))
    assert "reserved" in reserved

    changed = _refused(lambda: scheduling.patch_priority_class("gangway-high", {"value": 200}))
    assert "may not be changed in an update" in changed
    assert scheduling.read_priority_class("gangway-high").value == 100
    scheduling.patch_priority_class("gangway-high", {"description": "Still high."})
    scheduling.delete_priority_class("gangway-high")
    scheduling.create_priority_class(_pc("gangway-high", value=200))
    assert scheduling.read_priority_class("gangway-high").value == 200
