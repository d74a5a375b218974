"""A tenant's namespace exists before anything is written into it, on every path: a new
tenant whose first request needs the cluster autoscaler gets its nodes and its cluster,
and a request whose namespace was deleted behind gangway's back gets it back — with the
built-in queue (gangway writes the ProvisioningRequest) and in Kueue mode (Kueue does,
from the RayCluster and the LocalQueue gangway writes). A real worker, kubesim over HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusters.kube import bundles
from clusters.kube.gateway import NamespaceMissing, get_gateway
from clusters.models import ClusterRequest
from kubesim import KubeSim
from tenants.models import Role
from tests.clusters.engine.conftest import running_kubesim, wait_for
from tests.clusters.engine.growing_fleet import growing_kubesim, h100_nodes, make_h100_growable
from tests.factories import MembershipFactory, QuotaFactory, TenantFactory, UserFactory

PROVREQS = "provisioningrequests.autoscaling.x-k8s.io"


@pytest.fixture(params=["builtin", "kueue"])
def kubesim(request: Any, tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    """The growing fleet (one H100 node, room for one more), in either queue mode."""
    with growing_kubesim(tmp_path, settings, kueue=request.param == "kueue") as sim:
        yield sim


def _row(name: str) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().get(name=name)


def _waiting(name: str) -> str:
    """Where a row stands, for a failure's message."""
    row = _row(name)
    return f"{row.state} {row.queue_reason!r} {row.queue_message!r} {row.state_reason!r}"


def _namespace(name: str) -> dict[str, Any] | None:
    return get_gateway().get("v1", "Namespace", name)


def _busy_node(as_user: Any, charlie: Any) -> None:
    """globex's dev cluster on the one H100 node: a whole node is had only by adding one."""
    one = {"name": "one", "kind": "dev", "flavor": "h100", "workers": 1}
    response = as_user(charlie).post("/api/v1/tenants/globex/clusters/", one, format="json")
    assert response.status_code == 201, response.content
    wait_for(lambda: _row("one").state == "ready", what="globex's cluster ready", timeout=90)


def test_a_new_tenants_first_request_for_new_nodes_becomes_ready(
    kubesim: KubeSim,
    worker: Any,
    h100: Any,
    acme: Any,
    charlie: Any,
    as_user: Any,
    settings: Any,
) -> None:
    make_h100_growable(h100, acme)
    _busy_node(as_user, charlie)
    nlp = TenantFactory(slug="nlp", name="NLP")
    QuotaFactory(tenant=nlp, flavor=h100, gpus=24, borrow_limit=0)
    nina = UserFactory(username="nina")
    MembershipFactory(tenant=nlp, user=nina, role=Role.ADMIN)
    if settings.QUEUE_MODE == "builtin":
        assert _namespace("gw-nlp") is None  # it has never run anything

    # A whole node: the autoscaler adds it.
    body = {"name": "first", "kind": "prod", "flavor": "h100", "workers": 1}
    response = as_user(nina).post("/api/v1/tenants/nlp/clusters/", body, format="json")
    assert response.status_code == 201, response.content
    wait_for(lambda: _row("first").state == "ready", what="the first cluster ready", timeout=120)
    assert h100_nodes() == 2
    assert _namespace("gw-nlp") is not None
    row = _row("first")
    if settings.QUEUE_MODE == "builtin":  # gangway asked the autoscaler (Kueue does else)
        assert row.events.filter(reason="nodes_requested").exists()
    assert not row.events.filter(reason="nodes_request_failed").exists()
    assert row.last_error == ""


def test_a_request_whose_namespace_was_deleted_recovers(
    kubesim: KubeSim,
    worker: Any,
    h100: Any,
    acme: Any,
    globex: Any,
    as_user: Any,
    alice: Any,
    charlie: Any,
) -> None:
    make_h100_growable(h100, acme)
    # Another tenant holds the one H100 node, so acme's gang of two waits for nodes.
    _busy_node(as_user, charlie)
    two = {"name": "two", "kind": "prod", "flavor": "h100", "workers": 2}
    assert (
        as_user(alice).post("/api/v1/tenants/acme/clusters/", two, format="json").status_code == 201
    )
    wait_for(
        lambda: _row("two").queue_reason == "waiting_for_nodes",
        what=lambda: f"acme's gang waiting for nodes (its row: {_waiting('two')})",
        timeout=90,
    )
    # Its nodes are asked for (by gangway, or by Kueue's admission check).
    wait_for(lambda: kubesim.list(PROVREQS, "gw-acme"), what="the ProvisioningRequest written")

    # Somebody deletes acme's namespace, with everything gangway wrote into it.
    assert get_gateway().delete("v1", "Namespace", "gw-acme")
    wait_for(
        lambda: (
            not kubesim.list(PROVREQS, "gw-acme")
            and not kubesim.list("rayclusters.ray.io", "gw-acme")
        ),
        what="the namespace's contents gone",
    )

    # The node is freed: acme's gang gets its nodes and starts, in a namespace built again.
    assert as_user(charlie).delete("/api/v1/tenants/globex/clusters/one/").status_code == 202
    wait_for(lambda: _row("two").state == "ready", what="acme's gang ready", timeout=120)
    namespace = _namespace("gw-acme")
    assert namespace is not None and not namespace["metadata"].get("deletionTimestamp")
    assert _row("two").last_error == ""


def _pod_template(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": "gw-acme"},
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    }


@pytest.mark.django_db
def test_a_write_that_finds_the_namespace_gone_builds_it_again(
    tmp_path: Path, settings: Any, acme: Any
) -> None:
    """Without a worker: this process remembers applying acme's bundle, the namespace
    goes behind its back, and the next write into it (no reconcile pass in between)
    tells the missing namespace apart, builds the bundle again and writes."""
    with running_kubesim(tmp_path, settings):
        gw = get_gateway()
        bundles.forget_bundle(acme.pk)
        bundles.apply_into(acme, gw, [_pod_template("first")])
        assert gw.delete("v1", "Namespace", "gw-acme")
        wait_for(lambda: _namespace("gw-acme") is None, what="the namespace gone")
        with pytest.raises(NamespaceMissing):
            gw.apply(_pod_template("direct"))  # what a bare write meets

        bundles.apply_into(acme, gw, [_pod_template("second")])
        assert gw.get("v1", "PodTemplate", "second", "gw-acme") is not None
        assert gw.get("v1", "ResourceQuota", "gangway-quota", "gw-acme") is not None
