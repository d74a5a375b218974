"""The devices a DRA cluster's workers got (clusters.live.gpu_devices): read only for DRA
flavors while workers may hold devices, and an unreachable Kubernetes is a message on
the page and ``devices: null`` in the API, never a 5xx. The read itself, against kubesim,
is tests/clusters/engine/test_dra_e2e.py."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from clusters.live.gpu_devices import wants_devices
from clusters.models import ClusterRequest
from tenants.models import DeviceMode
from tests.factories import GpuFlavorFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def mig(acme: Any) -> Any:
    return GpuFlavorFactory(
        name="h100-1g", gpus_per_node=56, device_mode=DeviceMode.MIG, mig_profile="1g.10gb"
    )


def test_only_dra_flavors_holding_gpus_are_read(acme: Any, bob: Any, h100: Any, mig: Any) -> None:
    def row(flavor: Any, state: str) -> ClusterRequest:
        return ClusterRequest(tenant=acme, owner=bob, flavor=flavor, name="x", state=state)

    assert wants_devices(row(mig, "ready")) and wants_devices(row(mig, "provisioning"))
    assert not wants_devices(row(mig, "queued")) and not wants_devices(row(mig, "deleted"))
    assert not wants_devices(row(h100, "ready"))


def test_an_unreachable_kubernetes_is_null_and_a_message(
    acme: Any, bob: Any, mig: Any, as_user: Any, settings: Any
) -> None:
    settings.KUBECONFIG = "/nonexistent/kubeconfig"
    ClusterRequest.objects.create(
        tenant=acme, owner=bob, flavor=mig, name="slice", state="ready", workers=1, gpus=1
    )
    response = as_user(bob).get("/api/v1/tenants/acme/clusters/slice/")
    assert response.status_code == 200, response.content
    assert response.json()["devices"] is None
    browser = Client()
    browser.force_login(bob)
    page = browser.get("/t/acme/clusters/slice/")
    assert page.status_code == 200
    assert "could not be read" in page.content.decode()
