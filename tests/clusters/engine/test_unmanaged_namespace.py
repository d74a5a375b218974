"""A namespace gangway did not create is never adopted: not relabelled, nothing put in it.

A tenant's namespace name is derived from its slug, so a namespace of that name may
already exist on the cluster (a team's, or one from a previous installation). Provisioning
refuses it with a readable error instead of relabelling it and installing a default-deny
NetworkPolicy and a ResourceQuota into somebody else's namespace.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusters.kube import bundles, labels
from clusters.kube.gateway import Gateway, get_gateway
from clusters.models import ClusterEvent, ClusterRequest
from clusters.queue import kueue
from kubesim import KubeSim
from tenants.models import GpuFlavor
from tests.clusters.engine.conftest import running_kubesim, wait_for

REFUSAL = "namespace gw-acme exists and is not managed by gangway; refusing to adopt it"
# What a tenant bundle or a cluster would put into the namespace.
BUNDLE_KINDS = [
    ("v1", "ResourceQuota"),
    ("v1", "LimitRange"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("ray.io/v1", "RayCluster"),
    ("v1", "Pod"),
]


def _their_namespace(gw: Gateway, name: str, team_labels: dict[str, str]) -> dict[str, str]:
    gw.create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": team_labels}}
    )
    return dict(gw.get("v1", "Namespace", name)["metadata"]["labels"])


def _untouched(gw: Gateway, name: str, team_labels: dict[str, str]) -> None:
    assert gw.get("v1", "Namespace", name)["metadata"]["labels"] == team_labels
    for api_version, kind in BUNDLE_KINDS:
        assert gw.list(api_version, kind, namespace=name) == [], kind
    assert (
        gw.list("v1", "ServiceAccount", namespace=name, label_selector=labels.managed_selector())
        == []
    )


def _passes_after(moment: Any, count: int) -> None:
    # Each reconcile pass stamps the flavors' observed capacity; wait for ``count`` more.
    seen: set[Any] = set()

    def stamped() -> bool:
        at = GpuFlavor.objects.get(name="l4").observed_at
        if at is not None and at > moment:
            seen.add(at)
        return len(seen) >= count

    wait_for(stamped, what=f"{count} reconcile passes")


def test_an_existing_unmanaged_namespace_fails_the_request_and_is_left_alone(
    worker: Any, as_user: Any, bob: Any, acme: Any, l4: Any
) -> None:
    gw = get_gateway()
    team_labels = _their_namespace(gw, "gw-acme", {"team": "payments"})

    response = as_user(bob).post(
        "/api/v1/tenants/acme/clusters/",
        {"name": "bob-dev", "kind": "dev", "flavor": "l4", "workers": 1},
        format="json",
    )
    assert response.status_code == 201, response.content
    pk = ClusterRequest.objects.unscoped().get(name="bob-dev").pk
    row = wait_for(
        lambda: ClusterRequest.objects.unscoped().filter(pk=pk, state="failed").first(),
        what="the request failed",
    )
    assert row.last_error == REFUSAL
    assert not row.holds_gpus
    event = ClusterEvent.objects.filter(cluster_id=pk, to_state="failed").get()
    assert event.message == REFUSAL
    assert as_user(bob).get("/api/v1/tenants/acme/clusters/bob-dev/").json()["state"] == "failed"

    _passes_after(event.at, 2)  # the reconciler and the sweeper leave it alone too
    _untouched(gw, "gw-acme", team_labels)


@pytest.mark.django_db
def test_a_namespace_gangway_made_for_another_tenant_is_refused(
    kubesim: KubeSim, acme: Any
) -> None:
    gw = get_gateway()
    theirs = _their_namespace(
        gw, "gw-acme", {labels.MANAGED_BY: labels.MANAGER, labels.TENANT: "globex"}
    )
    bundles.forget_bundle(acme.pk)
    with pytest.raises(bundles.UnmanagedNamespace) as caught:
        bundles.ensure_bundle(acme, gw)
    assert caught.value.message == (
        "namespace gw-acme is managed by gangway for tenant globex, not acme; refusing to adopt it"
    )
    _untouched(gw, "gw-acme", theirs)


@pytest.mark.django_db
def test_an_absent_namespace_is_created_and_its_bundle_kept_in_step(
    kubesim: KubeSim, acme: Any
) -> None:
    gw = get_gateway()
    bundles.forget_bundle(acme.pk)
    assert bundles.ensure_bundle(acme, gw)
    ns = gw.get("v1", "Namespace", "gw-acme")
    assert ns["metadata"]["labels"][labels.TENANT] == "acme"
    assert gw.list("v1", "ResourceQuota", namespace="gw-acme")
    # Its own namespace, found again (a restarted worker has no memory of it): re-applied.
    assert bundles.ensure_bundle(acme, gw, force=True)


@pytest.fixture
def kueue_sim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    with running_kubesim(tmp_path, settings, kueue=True) as sim:
        yield sim


@pytest.mark.django_db
def test_kueue_mode_writes_no_local_queue_into_an_unmanaged_namespace(
    kueue_sim: KubeSim, acme: Any, globex: Any
) -> None:
    gw = get_gateway()
    team_labels = _their_namespace(gw, "gw-acme", {"team": "payments"})
    for tenant in (acme, globex):
        bundles.forget_bundle(tenant.pk)
    kueue.forget_queues()
    kueue.ensure_queues(gw)  # does not raise: one tenant's namespace stops no other
    assert gw.get("kueue.x-k8s.io/v1beta2", "LocalQueue", "gangway", "gw-globex") is not None
    assert gw.list("kueue.x-k8s.io/v1beta2", "LocalQueue", namespace="gw-acme") == []
    _untouched(gw, "gw-acme", team_labels)
