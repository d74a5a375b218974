"""seed_demo: the demo catalogue, tenants and logins, idempotent."""

from __future__ import annotations

import json
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command
from kubernetes import client, config

from clusters.domain.shapes import DEV_MAX_WORKERS, demand, flavor_spec
from clusters.kube import dra
from clusters.models import ClusterRequest
from clusters.queue.admission_pass import run_admission_pass
from clusters.requests.dry_run import dry_run_verdict
from clusters.requests.services import cluster_request_create
from clusters.rows.spec import ClusterSpec
from kubesim import KubeSim
from kubesim.fleet import load_fleet
from tenants.demo import FLAVORS, TENANTS, demo_seed
from tenants.models import AuditEvent, GpuFlavor, Membership, Quota, Role, Tenant
from tests.tenants.conftest import row_counts


def test_seed_demo_is_idempotent_and_prints_logins(db: Any) -> None:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    first = row_counts()
    call_command("seed_demo", stdout=StringIO())
    assert row_counts() == first
    assert AuditEvent.objects.filter(action="demo.seed").count() == 1

    text = out.getvalue()
    assert "gangway-demo" in text
    for username in ("admin", "ada", "eli", "vic", "sam", "emma", "eve", "val"):
        assert f"  {username} " in text

    assert sorted(Tenant.objects.values_list("slug", "cohort")) == [
        ("speech", "research"),
        ("vision", "research"),
    ]
    h100 = GpuFlavor.objects.get(name="h100")
    assert (h100.gpu_product, h100.gpus_per_node, h100.cpu_per_node) == (
        "NVIDIA-H100-80GB-HBM3",
        8,
        192,
    )
    assert (h100.memory_per_node_gib, h100.node_count, h100.sharing) == (1800, 4, False)
    l4 = GpuFlavor.objects.get(name="l4")
    assert (l4.gpu_product, l4.gpus_per_node, l4.node_count, l4.sharing) == (
        "NVIDIA-L4",
        1,
        4,
        True,
    )
    mig = GpuFlavor.objects.get(name="h100-1g")
    assert (mig.device_mode, mig.mig_profile, mig.gpus_per_node, mig.node_count) == (
        "mig",
        "1g.10gb",
        56,
        1,
    )
    assert mig.dra_device_class == "mig.nvidia.com" and mig.full_clean() is None
    assert Quota.objects.count() == 6
    for slug in ("vision", "speech"):
        roles = set(Membership.objects.filter(tenant__slug=slug).values_list("role", flat=True))
        assert roles == set(Role.values)
    assert get_user_model().objects.get(username="admin").is_staff
    assert authenticate(username="eli", password="gangway-demo") is not None


def _largest_shapes(tenant: Tenant, quota: Quota) -> list[tuple[str, int]]:
    """The largest clusters the tenant's quota and borrowing allow on one flavor: whole
    nodes as a production cluster, and as many single-GPU dev workers as one engineer
    may hold."""
    entitled = quota.gpus + quota.borrow_limit
    flavor = quota.flavor
    shapes = [("dev", min(entitled, tenant.max_dev_gpus_per_user, DEV_MAX_WORKERS))]
    if entitled >= flavor.gpus_per_node:
        shapes.append(("prod", min(entitled // flavor.gpus_per_node, flavor.node_count)))
    return shapes


@pytest.mark.parametrize("slug", sorted(TENANTS))
def test_the_largest_cluster_a_demo_tenant_may_borrow_for_fits_now(db: Any, slug: str) -> None:
    # vision may borrow 8 H100s: its 3-node production cluster must not be refused for a
    # CPU or memory quota it cannot see.
    demo_seed()
    tenant = Tenant.objects.get(slug=slug)
    admin = Membership.objects.get(tenant=tenant, role=Role.ADMIN).user
    for quota in Quota.objects.filter(tenant=tenant).select_related("flavor"):
        for kind, workers in _largest_shapes(tenant, quota):
            verdict = dry_run_verdict(
                tenant=tenant,
                owner=admin,
                spec=ClusterSpec(kind=kind, flavor=quota.flavor, workers=workers),
            )
            assert verdict["verdict"] == "fits_now", (kind, workers, quota.flavor.name, verdict)


@pytest.mark.parametrize("slug", sorted(TENANTS))
def test_a_demo_tenant_may_hold_its_whole_gpu_quota_at_once(db: Any, slug: str) -> None:
    # Every GPU it may borrow, in production clusters of each flavor at the same time (each
    # with its head): the CPU and memory quotas admit them all. The MIG flavor's quota is
    # less than its node's 56 slices, so it is held in dev clusters (the next test checks
    # the quotas against every slice in that shape).
    demo_seed()
    tenant = Tenant.objects.get(slug=slug)
    admin = Membership.objects.get(tenant=tenant, role=Role.ADMIN).user
    pks = []
    for quota in Quota.objects.filter(tenant=tenant).select_related("flavor"):
        workers = (quota.gpus + quota.borrow_limit) // quota.flavor.gpus_per_node
        kind = "prod" if workers else "dev"
        workers = workers or tenant.max_dev_gpus_per_user
        cluster = cluster_request_create(
            actor=admin,
            tenant=tenant,
            spec=ClusterSpec(
                name=f"all-{quota.flavor.name}", kind=kind, flavor=quota.flavor, workers=workers
            ),
        )
        pks.append(cluster.pk)
    run_admission_pass()
    rows = ClusterRequest.objects.unscoped().filter(pk__in=pks)
    assert {row.state for row in rows} == {"admitted"}, [(r.name, r.queue_message) for r in rows]


@pytest.mark.parametrize("slug", sorted(TENANTS))
def test_cpu_and_memory_quotas_cover_every_gpu_in_the_hungriest_shape(db: Any, slug: str) -> None:
    # tenants/demo.py's arithmetic: every GPU (and MIG slice) the tenant may hold, borrowed
    # ones included, as single-GPU dev clusters each with its own head.
    demo_seed()
    tenant = Tenant.objects.get(slug=slug)
    cpu = memory = Decimal(0)
    for quota in Quota.objects.filter(tenant=tenant).select_related("flavor"):
        one = demand(kind="dev", flavor=flavor_spec(quota.flavor), workers=1, gpu_fraction=None)
        cpu += one.cpu * (quota.gpus + quota.borrow_limit)
        memory += one.memory_gib * (quota.gpus + quota.borrow_limit)
    assert (cpu, memory) <= (tenant.cpu_quota, tenant.memory_quota_gib)
    assert cpu > tenant.cpu_quota - 10, "the quota is sized to the shape, not far above it"


def test_a_newcomer_may_ask_for_a_dev_cluster_on_a_mig_slice(db: Any) -> None:
    # eli, an engineer of vision, gets a 1g.10gb slice of the H100 the DRA driver manages:
    # admitted now, counted against vision's h100-1g quota and not its whole H100s.
    demo_seed()
    vision = Tenant.objects.get(slug="vision")
    eli = get_user_model().objects.get(username="eli")
    mig = GpuFlavor.objects.get(name="h100-1g")
    spec = ClusterSpec(kind="dev", flavor=mig, workers=1, name="eli-mig")
    assert dry_run_verdict(tenant=vision, owner=eli, spec=spec)["verdict"] == "fits_now"
    cluster = cluster_request_create(actor=eli, tenant=vision, spec=spec)
    run_admission_pass()
    cluster.refresh_from_db()
    assert (cluster.state, cluster.flavor.name, cluster.gpus) == ("admitted", "h100-1g", 1)


def test_the_demo_catalogue_is_the_demo_fleet() -> None:
    # seed_demo's flavors describe kubesim's demo fleet node for node, so what admission
    # believes fits is what the simulated cluster can place. An extended-resource flavor is
    # a pool whose nodes advertise nvidia.com/gpu; a MIG flavor the pool the DRA driver
    # manages, partitioned in its profile (its GPUs are the slices).
    pools = {}
    for pool in load_fleet(None)["pools"]:
        labels = pool.get("labels") or {}
        if "nvidia.com/gpu.product" in labels:
            profile = (pool.get("mig") or {}).get("profile", "")
            pools[labels["nvidia.com/gpu.product"], profile] = pool
    assert len(pools) == len(FLAVORS)
    for name, spec in FLAVORS.items():
        pool = pools[spec["gpu_product"], spec.get("mig_profile", "")]
        alloc = pool["allocatable"]
        assert pool["count"] == spec["node_count"], name
        if spec.get("device_mode", "extended") == "extended":
            gpus = int(alloc["nvidia.com/gpu"])
        else:
            assert "nvidia.com/gpu" not in alloc, name  # the DRA driver's node, not the plugin's
            gpus = int(pool["labels"]["nvidia.com/gpu.count"]) * int(pool["mig"]["perGpu"])
        assert gpus == spec["gpus_per_node"], name
        assert int(alloc["cpu"]) == spec["cpu_per_node"], name
        assert alloc["memory"] == f"{spec['memory_per_node_gib']}Gi", name


def test_a_worker_on_the_mig_flavor_claims_one_slice_of_the_demo_fleet(tmp_path: Path) -> None:
    # The claim template the h100-1g flavor's workers get (clusters/kube/dra.py), against
    # kubesim's demo fleet over HTTP: the worker lands on the node the DRA driver manages,
    # is handed one 1g.10gb partition and sees only that partition's UUID.
    flavor = flavor_spec(GpuFlavor(name="h100-1g", **FLAVORS["h100-1g"]))
    template = dra.claim_template(
        name="eli-mig-gpus", namespace="default", labels={}, flavor=flavor, count=1
    )
    container = {"name": "ray-worker", "image": "rayproject/ray"}
    pod: dict[str, Any] = {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "nodeSelector": {"nvidia.com/gpu.product": flavor.gpu_product},
        "containers": [container],
    }
    dra.claim_from_template(pod, container, "eli-mig-gpus")
    with KubeSim(startup_delay=0.0) as sim:
        api = config.new_client_from_config(config_file=sim.write_kubeconfig(str(tmp_path / "k")))
        try:
            client.ResourceV1Api(api).create_namespaced_resource_claim_template("default", template)
            body = {"metadata": {"name": "eli-mig-worker"}, "spec": pod}
            client.CoreV1Api(api).create_namespaced_pod("default", body)
            got = client.CoreV1Api(api).read_namespaced_pod("eli-mig-worker", "default")
            (status,) = got.status.resource_claim_statuses
            claim = client.ResourceV1Api(api).read_namespaced_resource_claim(
                status.resource_claim_name, "default"
            )
        finally:
            api.close()
        (result,) = claim.status.allocation.devices.results
        (piece,) = sim.list("resourceslices.resource.k8s.io", "")
        devices = {d["name"]: d["attributes"] for d in piece["spec"]["devices"]}
    assert (got.status.phase, got.spec.node_name) == ("Running", "demo-h100-mig-0")
    attrs = devices[result.device]
    assert (attrs["type"]["string"], attrs["profile"]["string"]) == ("mig", "1g.10gb")
    visible = json.loads(got.metadata.annotations["kubesim.io/nvidia-visible-devices"])
    assert visible == {"ray-worker": attrs["uuid"]["string"]}
