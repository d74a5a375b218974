"""The platform's capacity and fair-share pages, the order notes on the queue pages, queue
reasons in words and the home page's legend: permissions, numbers on a hand-built fleet,
the node grid read from kubesim through the gateway, and constant query counts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.domain.states import State
from clusters.models import ClusterRequest
from clusters.queue.admission_pass import run_admission_pass
from clusters.requests import services
from clusters.rows.spec import ClusterSpec
from tenants.models import GpuFlavor, Quota
from tests.clusters.engine.conftest import running_kubesim
from tests.factories import GpuFlavorFactory, QuotaFactory, TenantFactory, UserFactory
from tests.frontend.conftest import make_ready
from tests.frontend.test_pages import client_for

PLATFORM_PAGES = ["/capacity/", "/fair-share/"]
RAW_CODES = ["tenant_quota", "cohort_quota", "head_of_line", "user_cap", "waiting_for_nodes"]


def _row(html: str, attribute: str, value: str) -> str:
    """The HTML of the table row (or row group) with ``attribute="value"``."""
    match = re.search(rf'<(tr|tbody) {attribute}="{value}">(.*?)</\1>', html, re.S)
    assert match, f"no row {attribute}={value}"
    return match.group(2)


def _cell(row: str, name: str) -> str:
    match = re.search(rf"<td [^>]*{name}>(.*?)</td>", row, re.S)
    assert match, f"no cell {name}"
    return re.sub(r"<[^>]+>", " ", match.group(1)).split()[0]


def _create(actor: Any, tenant: Any, **shape: Any) -> ClusterRequest:
    return services.cluster_request_create(actor=actor, tenant=tenant, spec=ClusterSpec(**shape))


@pytest.fixture
def fleet(root: Any, alice: Any, bob: Any, charlie: Any, acme: Any, globex: Any, h100: Any) -> Any:
    """acme holds a one-GPU dev cluster (bob) and a one-node prod cluster (alice, 8 GPUs),
    globex a one-node prod cluster (charlie); acme waits for 16 more H100s (beyond its
    16 + 8)."""
    make_ready(_create(bob, acme, name="bob-dev", kind="dev", flavor=h100, workers=1))
    make_ready(_create(alice, acme, name="train", kind="prod", flavor=h100, workers=1))
    make_ready(_create(root, globex, name="serve", kind="prod", flavor=h100, workers=1))
    _create(alice, acme, name="big", kind="prod", flavor=h100, workers=2)
    Quota.objects.filter(tenant=acme, flavor=h100).update(borrow_limit=0, gpus=9)
    run_admission_pass()
    return ClusterRequest.objects.get(name="big")


# --- who may see them


def test_anonymous_visitors_are_sent_to_sign_in(client: Client) -> None:
    for url in PLATFORM_PAGES:
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith("/login/"), url


def test_tenant_admins_and_members_get_a_404(alice: Any, bob: Any, root: Any) -> None:
    for user in (alice, bob):
        for url in PLATFORM_PAGES:
            assert client_for(user).get(url).status_code == 404, (user, url)
    for url in PLATFORM_PAGES:
        assert client_for(root).get(url).status_code == 200, url


# --- capacity


def test_capacity_per_flavor(fleet: Any, root: Any, h100: Any) -> None:
    assert fleet.state == State.QUEUED and fleet.queue_reason == "tenant_quota"
    html = client_for(root).get("/capacity/").content.decode()
    row = _row(html, "data-flavor", "h100")
    # 4 nodes x 8; acme holds 1 + 8, globex 8; acme's 2-node request waits for 16.
    assert _cell(row, "data-nodes") == "4" and _cell(row, "data-total") == "32"
    assert _cell(row, "data-allocated") == "17" and _cell(row, "data-free") == "15"
    assert _cell(row, "data-whole-nodes") == "1" and "(est.)" in row
    assert _cell(row, "data-waiting") == "16" and "1 request" in row
    assert '<li data-held="acme"><span class="swatch seg-0"></span>acme 9</li>' in row
    assert '<li data-held="globex"><span class="swatch seg-1"></span>globex 8</li>' in row
    assert 'data-percent="28"' in row  # acme's 9 of 32 GPUs as a bar segment
    # Once the reconciler has seen the cluster, its figures are shown.
    GpuFlavor.objects.filter(pk=h100.pk).update(
        observed_free_gpus=14, observed_free_nodes=0, observed_at=timezone.now()
    )
    row = _row(client_for(root).get("/capacity/").content.decode(), "data-flavor", "h100")
    assert "14 seen free" in row and _cell(row, "data-whole-nodes") == "0" and "est." not in row


def test_an_unreachable_kubernetes_is_a_message_not_an_error(root: Any, settings: Any) -> None:
    settings.KUBECONFIG = "/nonexistent/kubeconfig"
    response = client_for(root).get("/capacity/")
    assert response.status_code == 200
    assert "data-nodes-error" in response.content.decode()
    assert "Kubernetes could not be reached" in response.content.decode()


def test_htmx_polls_get_the_live_part_only(root: Any, h100: Any) -> None:
    for url, marker in (("/capacity/", "capacity-live"), ("/fair-share/", "fairshare-live")):
        html = client_for(root).get(url, headers={"HX-Request": "true"}).content.decode()
        assert html.lstrip().startswith(f'<div id="{marker}"') and "<html" not in html


def test_the_node_grid_from_kubesim_through_the_gateway(
    tmp_path: Path, settings: Any, root: Any, acme: Any, bob: Any, h100: Any, l4: Any
) -> None:
    cluster = ClusterRequest.objects.create(
        tenant=acme, owner=bob, name="on-node", flavor=h100, workers=1, gpus=8
    )
    # A MIG flavor of the same product names the DRA driver's node, not the plugin's.
    GpuFlavor.objects.create(
        name="h100-1g",
        gpu_product=h100.gpu_product,
        gpus_per_node=56,
        cpu_per_node=192,
        memory_per_node_gib=1800,
        node_count=1,
        device_mode="mig",
        mig_profile="1g.10gb",
    )
    with running_kubesim(tmp_path, settings) as sim:
        from clusters.kube.gateway import get_gateway

        gw = get_gateway()
        gw.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gw-acme"}})
        for name, node, gpus, labels in (
            ("worker", "demo-h100-1", 8, {"gangway.dev/cluster-id": str(cluster.pk)}),
            ("stray", "demo-h100-2", 2, {}),
        ):
            gw.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": "gw-acme", "labels": labels},
                    "spec": {
                        "nodeName": node,
                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox",
                                "resources": {
                                    "requests": {"nvidia.com/gpu": str(gpus)},
                                    "limits": {"nvidia.com/gpu": str(gpus)},
                                },
                            }
                        ],
                    },
                }
            )
        html = client_for(root).get("/capacity/").content.decode()
        sim.stop()
        # Read once, then from the cache for a few seconds: no request reaches Kubernetes.
        cached = client_for(root).get("/capacity/").content.decode()
    assert "data-nodes-error" not in html
    full = _row(html, "data-node", "demo-h100-1")
    assert "h100" in full and "8 / 8" in full and "acme/on-node" in full
    stray = _row(html, "data-node", "demo-h100-2")
    assert "2 / 8" in stray and "+ 2 GPUs of other pods" in stray
    assert "0 / 1" in _row(html, "data-node", "demo-l4-0")
    assert 'title="demo-h100-1 (h100): 8 of 8 GPUs used by acme/on-node"' in html
    assert "h100-1g" in _row(html, "data-node", "demo-h100-mig-0")
    assert "h100-1g" not in _row(html, "data-node", "demo-h100-3")
    # 4 H100 and 4 L4 nodes, and the H100 node in MIG slices; CPU nodes left out.
    assert html.count('<li class="node') == 9
    assert "acme/on-node" in cached and "data-nodes-error" not in cached


# --- fair share


def test_fair_share_numbers_and_the_lending_limit(fleet: Any, root: Any, h100: Any) -> None:
    html = client_for(root).get("/fair-share/").content.decode()
    # acme: nominal 9 now, holds 9 (share 9/32); globex holds 8 of its 16.
    acme = _row(html, "data-tenant", "acme")
    assert "0.28" in acme and _cell(_row(acme, "data-flavor", "h100"), "data-used") == "9"
    globex = _row(html, "data-tenant", "globex")
    assert _cell(_row(globex, "data-flavor", "h100"), "data-lent") == "0"
    # acme borrows 3 (holds 9 of a nominal 6): globex lends them, then at most its limit.
    Quota.objects.filter(tenant__slug="acme", flavor=h100).update(gpus=6)
    html = client_for(root).get("/fair-share/").content.decode()
    acme_h100 = _row(_row(html, "data-tenant", "acme"), "data-flavor", "h100")
    assert _cell(acme_h100, "data-borrowed") == "3"
    globex_h100 = _row(_row(html, "data-tenant", "globex"), "data-flavor", "h100")
    assert _cell(globex_h100, "data-lent") == "3"
    Quota.objects.filter(tenant__slug="globex", flavor=h100).update(lend_limit=2)
    html = client_for(root).get("/fair-share/").content.decode()
    globex_h100 = _row(_row(html, "data-tenant", "globex"), "data-flavor", "h100")
    assert _cell(globex_h100, "data-lent") == "2" and "lends at most 2" in globex_h100


def test_a_binding_cpu_quota_is_marked(fleet: Any, root: Any, acme: Any) -> None:
    # A CPU quota one core short of what acme holds plus the waiting request: it binds
    # (the GPU quota no longer does); memory has room and does not.
    held = sum(c.cpu for c in ClusterRequest.objects.filter(tenant=acme, holds_gpus=True))
    acme.cpu_quota = int(held + fleet.cpu) - 1
    acme.save()
    Quota.objects.filter(tenant=acme).update(gpus=40)
    html = client_for(root).get("/fair-share/").content.decode()
    acme_rows = _row(html, "data-tenant", "acme")
    cpu = f"CPU {held.normalize():f} / {acme.cpu_quota} cores · <strong>binding</strong>"
    assert cpu in acme_rows
    assert re.search(r"memory \d+ / 8000 GiB</span>", acme_rows)


# --- the queue pages: an order note on each waiting request, reasons in words


def test_queue_pages_explain_the_order_and_show_no_raw_codes(
    root: Any, alice: Any, charlie: Any, acme: Any, globex: Any, h100: Any
) -> None:
    # The cohort's 32 H100s are taken: acme holds 24 (16 + 8 borrowed), globex 8. Both
    # wait; globex's share (8/32) is below acme's (24/32), so it goes first.
    Quota.objects.filter(flavor=h100).update(gpus=16, borrow_limit=8)
    for name in ("a1", "a2", "a3"):
        make_ready(_create(alice, acme, name=name, kind="prod", flavor=h100, workers=1))
    make_ready(_create(root, globex, name="g1", kind="prod", flavor=h100, workers=1))
    _create(alice, acme, name="a-waits", kind="prod", flavor=h100, workers=1)
    _create(root, globex, name="g-waits", kind="prod", flavor=h100, workers=2)
    run_admission_pass()
    waits = ClusterRequest.objects.get(name="a-waits")
    assert waits.state == State.QUEUED and waits.queue_reason == "tenant_quota"
    admin_view = client_for(root).get("/queue/").content.decode()
    assert "Globex is ahead: its weighted share is 0.25, acme&#x27;s is 0.75." in admin_view
    assert '<td data-label="Flavor">h100</td>' in admin_view  # the flavor column
    own_view = client_for(alice).get("/t/acme/queue/").content.decode()
    assert "Another team is ahead: its weighted share is 0.25, acme&#x27;s is 0.75." in own_view
    assert "globex" not in own_view
    for html in (admin_view, own_view):
        assert "team quota used up" in html
        for code in RAW_CODES:
            assert code not in html, code


def test_home_has_a_legend_for_the_quota_bars(bob: Any, acme: Any, h100: Any) -> None:
    # acme holds 18 of a nominal 16: the bar is orange, and the legend says what it means.
    ClusterRequest.objects.create(
        tenant=acme, owner=bob, name="big", flavor=h100, gpus=18, state=State.READY, holds_gpus=True
    )
    home = client_for(bob).get("/").content.decode()
    assert "18 / 16 GPUs" in home and "(borrowing)" in home
    legend = re.search(r"<p class=\"legend muted\" data-legend>(.*?)</p>", home, re.S)
    assert legend and "within the nominal quota" in legend.group(1)
    assert "borrowing unused quota of other teams" in legend.group(1)


# --- constant query counts


def _populate(start: int, n: int) -> None:
    """``n`` more tenants, each with a flavor of its own, a quota with a lending limit, a
    cluster holding GPUs and a waiting one."""
    for i in range(start, start + n):
        flavor = GpuFlavorFactory(name=f"f{i}", gpu_product=f"P-{i}")
        tenant = TenantFactory(slug=f"t{i}", name=f"T{i}", cpu_quota=100)
        QuotaFactory(tenant=tenant, flavor=flavor, gpus=8, lend_limit=2)
        owner = UserFactory(username=f"u{i}")
        for name, state, holds in (("held", State.READY, True), ("waits", State.QUEUED, False)):
            ClusterRequest.objects.create(
                tenant=tenant,
                owner=owner,
                name=name,
                flavor=flavor,
                gpus=4,
                cpu=10,
                state=state,
                holds_gpus=holds,
            )


@pytest.mark.parametrize("url", [*PLATFORM_PAGES, "/queue/"])
def test_platform_pages_cost_the_same_queries_for_more_rows(root: Any, url: str) -> None:
    from clusters.queue import dry_run_cache as recorded

    client = client_for(root)
    counts = []
    for start, n in ((0, 2), (2, 6)):
        _populate(start, n)
        recorded.forget()
        client.get(url)  # warm the session and the node cache
        recorded.forget()
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


def test_a_fleet_shows_each_members_share_and_which_member_cannot_be_read(
    transactional_db: Any, tmp_path: Path, settings: Any, root: Any, h100: Any
) -> None:
    # transactional: each member's pass runs in a thread of its own, on its own connection.
    from clusters import tasks
    from clusters.models import FlavorStock, KubeCluster
    from tests.clusters.engine.fleet_sims import fleet_of

    with fleet_of(tmp_path, settings, "onprem", "cloud") as members:
        for member in members.values():
            FlavorStock.objects.create(kube_cluster=member.row, flavor=h100, node_count=4)
        KubeCluster.objects.create(name="gone", server="http://127.0.0.1:9", placement_order=9)
        tasks.reconcile()  # each member's pass records what its nodes have free
        html = client_for(root).get("/capacity/").content.decode()
    row = _row(html, "data-flavor", "h100")
    assert "onprem: 4, 32 GPUs seen free" in row and "cloud: 4, 32 GPUs seen free" in row
    assert '<th scope="col">Kubernetes cluster</th>' in html
    assert "in cloud):" in html  # the grid's cells name their member
    banner = re.search(r"<p [^>]*data-member-unreachable>([^<]*)</p>", html)
    assert banner and banner.group(1).startswith("Cannot read the nodes of gone: "), banner


def test_dra_devices_per_class_and_profile_and_partitions_per_gpu(
    tmp_path: Path, settings: Any, root: Any
) -> None:
    """A fleet with H100s both ways: the flavor table names each DRA flavor's class and
    profile with the devices a pass saw free; the node table puts each pool's nodes under
    its own flavors and lists the DRA GPUs in use, whole or by partitions."""
    from clusters.engine.reconciler import reconcile_once
    from tests.clusters.engine.conftest import wait_for
    from tests.clusters.queue.dra_fleet import (
        MIG_PROFILE,
        claim_devices,
        dra_flavors,
        dra_kubesim,
    )

    dra_flavors()
    with dra_kubesim(tmp_path, settings) as sim:
        claim_devices(
            "slices", "dra-mig-0", device_class="mig.nvidia.com", count=4, selector=MIG_PROFILE
        )
        claim_devices("whole", "dra-mig-1", device_class="gpu.nvidia.com", count=1)
        wait_for(
            lambda: all(
                (sim.get("pods", "default", n) or {}).get("status", {}).get("phase") == "Running"
                for n in ("slices", "whole")
            ),
            what="the claiming pods running",
        )
        reconcile_once()
        html = client_for(root).get("/capacity/").content.decode()
    mig = _row(html, "data-flavor", "h100-1g")
    assert "mig.nvidia.com · 1g.10gb" in mig and "101 seen free" in mig
    assert "gpu.nvidia.com" in _row(html, "data-flavor", "h100-dra")
    assert "data-devices" not in _row(html, "data-flavor", "h100")
    slices = _row(html, "data-node", "dra-mig-0")
    assert "<td>h100-1g, h100-dra</td>" in slices and "1 / 8" in slices
    assert re.search(r"<span data-device>gpu-\d: 4 of 7 1g\.10gb in use</span>", slices), slices
    whole = _row(html, "data-node", "dra-mig-1")
    assert re.search(r"<span data-device>gpu-\d: in use whole</span>", whole), whole
    plugin = _row(html, "data-node", "dra-h100-0")
    assert "<td>h100</td>" in plugin and "0 / 8" in plugin


def test_whole_nodes_free_per_rack_of_a_flavor_with_a_topology(
    tmp_path: Path, settings: Any, root: Any, h100: Any
) -> None:
    rack = "network.topology.kubernetes.io/rack"
    h100.topology = [rack]
    h100.save()
    fleet = {
        "name": "racks",
        "pools": [
            {
                "name": "h100",
                "count": 4,
                "labels": {"nvidia.com/gpu.product": h100.gpu_product},
                "allocatable": {"cpu": "192", "memory": "1800Gi", "nvidia.com/gpu": "8"},
                "topology": [{"key": rack, "nodes": 2}],
            },
            {"name": "cpu", "count": 1, "allocatable": {"cpu": "32", "memory": "128Gi"}},
        ],
    }
    with running_kubesim(tmp_path, settings, fleet=fleet):
        from clusters.kube.gateway import get_gateway

        get_gateway().create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "one-gpu", "namespace": "default"},
                "spec": {
                    "nodeName": "racks-h100-0",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                },
            }
        )
        html = client_for(root).get("/capacity/").content.decode()
    assert "Whole nodes free per topology domain" in html
    # One GPU in use on a node of rack 0 leaves it one whole node; rack 1 has both.
    assert "1 of 2" in _row(html, "data-domain", "h100-rack-0")
    assert "2 of 2" in _row(html, "data-domain", "h100-rack-1")
