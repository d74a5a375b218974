"""GPU utilisation through Prometheus end to end: Debian's ``prometheus`` scrapes kubesim's
DCGM exporters through the API server's node proxy, with a bearer token whose identity
RBAC lets ``get`` ``nodes/proxy``, and ``read_gpu_utilization`` with ``PROMETHEUS_URL``
pointed at it must answer what the direct node-proxy read answers for the same cluster.

Two scrape configurations are read: ``honor_labels: true`` (the exporter's ``namespace``,
``pod`` and ``container`` kept, as docs/gpu-utilization.md recommends) and
``honor_labels: false`` with the target labels a ServiceMonitor attaches (the exporter's
own pod), which renames the exporter's labels ``exported_*``. A Prometheus that cannot be
reached, or a server that is not one, gives a reading with an error, not an exception.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from clusters.kube.dcgm import GpuReading, read_gpu_utilization
from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest
from kubesim import KubeSim
from kubesim.fleet import load_fleet
from tests.clusters.engine.conftest import running_kubesim, wait_for
from tests.make_run import free_port, until

pytestmark = pytest.mark.slow

# The scraper's identity: a fleet user, granted what a Prometheus's ClusterRole grants.
TOKEN = "prometheus-scrape-token-0123456789"
SCRAPER = "prometheus"
# A value kubesim holds the cluster's GPUs at, so that both paths must agree exactly.
FORCED = 37


@pytest.fixture
def kubesim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    """The live cluster's kubesim (overrides the engine's), with the scraper's token known
    and its RBAC applied: ``get`` on ``nodes/proxy`` and nothing else."""
    fleet = {
        **load_fleet(None),
        "users": [{"name": SCRAPER, "token": TOKEN, "username": SCRAPER}],
    }
    with running_kubesim(tmp_path, settings, fleet=fleet) as sim:
        # As the cluster's admin would (gangway's gateway knows no RBAC kinds).
        rbac = "rbac.authorization.k8s.io"
        _create(
            sim,
            f"/apis/{rbac}/v1/clusterroles",
            {
                "apiVersion": f"{rbac}/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "dcgm-scraper"},
                "rules": [{"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]}],
            },
        )
        _create(
            sim,
            f"/apis/{rbac}/v1/clusterrolebindings",
            {
                "apiVersion": f"{rbac}/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "dcgm-scraper"},
                "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "dcgm-scraper"},
                "subjects": [{"apiGroup": rbac, "kind": "User", "name": SCRAPER}],
            },
        )
        yield sim


def _create(sim: KubeSim, path: str, obj: dict[str, Any]) -> None:
    """POST ``obj`` to kubesim as its admin (no token)."""
    request = urllib.request.Request(
        f"{sim.url}{path}",
        data=json.dumps(obj).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 201, answer.read()


def _through(url: str, cluster: ClusterRequest) -> GpuReading:
    """A reading with ``PROMETHEUS_URL`` set to ``url`` ("" for the node proxy). Not the
    ``settings`` fixture: each of its assignments nests another layer of overrides, and a
    poll that sets it thousands of times ends in a RecursionError."""
    with override_settings(PROMETHEUS_URL=url):
        return read_gpu_utilization(get_gateway(), cluster)


def _direct(cluster: ClusterRequest) -> GpuReading:
    return _through("", cluster)


def _force(cluster: ClusterRequest, value: str | None) -> None:
    get_gateway().merge_patch(
        "ray.io/v1",
        "RayCluster",
        cluster.name,
        {"metadata": {"annotations": {"kubesim.io/gpu-utilization": value}}},
        cluster.namespace,
    )


def _worker_nodes(cluster: ClusterRequest) -> tuple[GpuReading, set[str]]:
    """The first direct reading that shows a worker GPU (workers start after the head),
    and the nodes the cluster's workers run on."""
    found: list[GpuReading] = []

    def seen() -> bool:
        found[:] = [_direct(cluster)]
        return bool(found[0].gpus)

    wait_for(seen, timeout=30, what="the worker's GPU in the exporter's metrics")
    pods = get_gateway().list(
        "v1",
        "Pod",
        namespace=cluster.namespace,
        label_selector=f"ray.io/cluster={cluster.name},ray.io/node-type!=head",
    )
    return found[0], {p["spec"]["nodeName"] for p in pods}


def scrape_config(
    api_server: str, nodes: set[str], *, honor_labels: bool, target_labels: dict[str, str]
) -> str:
    """One job per GPU node: its exporter through ``api_server``'s node proxy, with the
    scraper's bearer token (YAML is a superset of JSON: the dumped strings are safe)."""
    jobs = "".join(
        f"  - job_name: {json.dumps(f'dcgm-{node}')}\n"
        f"    honor_labels: {json.dumps(honor_labels)}\n"
        "    scheme: http\n"
        f"    metrics_path: {json.dumps(f'/api/v1/nodes/{node}:9400/proxy/metrics')}\n"
        "    authorization:\n"
        "      type: Bearer\n"
        f"      credentials: {json.dumps(TOKEN)}\n"
        "    static_configs:\n"
        f"      - targets: [{json.dumps(api_server)}]\n"
        f"        labels: {json.dumps(target_labels)}\n"
        for node in sorted(nodes)
    )
    return (
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "  evaluation_interval: 1s\nscrape_configs:\n" + jobs
    )


@contextmanager
def prometheus(home: Path, config: str) -> Iterator[int]:
    """Debian's Prometheus on a free port with ``config``, ready; stopped after."""
    binary = shutil.which("prometheus")
    assert binary, "Debian's prometheus is missing: apt-get install -y prometheus"
    (home / "data").mkdir(parents=True)
    (home / "prometheus.yml").write_text(config)
    port = free_port()
    log = (home / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={home / 'prometheus.yml'}",
            f"--storage.tsdb.path={home / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def ready() -> bool:
        assert proc.poll() is None, (home / "prometheus.log").read_text()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=5) as answer:
            return bool(answer.status == 200)

    try:
        until(ready, 60, "Prometheus to be ready")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _query(port: int, promql: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=30) as response:
        answer = json.loads(response.read())
    assert answer["status"] == "success", answer
    return list(answer["data"]["result"])


def _agrees(url: str, cluster: ClusterRequest) -> tuple[GpuReading, GpuReading]:
    """Wait until the reading through Prometheus equals a direct one read just before it
    (a scrape can lag the exporter by one interval), both with GPUs, and return both."""
    last: list[GpuReading] = []

    def same() -> bool:
        last[:] = [_direct(cluster), _through(url, cluster)]
        return bool(last[0].gpus) and last[0] == last[1]

    wait_for(same, timeout=60, what=lambda: f"Prometheus's reading to match: {last}")
    return last[0], last[1]


def test_prometheus_reading_matches_the_node_proxy_with_honor_labels(
    live_cluster: ClusterRequest, kubesim: KubeSim, tmp_path: Path
) -> None:
    _force(live_cluster, str(FORCED))
    first, nodes = _worker_nodes(live_cluster)
    assert nodes and first.error == ""
    config = scrape_config(f"127.0.0.1:{kubesim.port}", nodes, honor_labels=True, target_labels={})
    with prometheus(tmp_path / "prometheus", config) as port:
        url = f"http://127.0.0.1:{port}"
        until(
            lambda: (
                _query(port, 'up{job=~"dcgm-.*"}')
                and all(r["value"][1] == "1" for r in _query(port, 'up{job=~"dcgm-.*"}'))
            ),
            60,
            "Prometheus to scrape every GPU node's exporter",
        )
        _, through = _agrees(url, live_cluster)
        assert through.error == ""
        assert {(g.pod, g.gpu_uuid) for g in through.gpus} == {
            (g.pod, g.gpu_uuid) for g in first.gpus
        }
        assert all(g.utilization == FORCED and g.memory_used_mib > 0 for g in through.gpus)
        # What Prometheus holds: the exporter's labels as it wrote them, plus job/instance.
        [series] = [
            r["metric"]
            for r in _query(port, f'DCGM_FI_DEV_GPU_UTIL{{namespace="{live_cluster.namespace}"}}')
        ]
        assert series["pod"] == through.gpus[0].pod and series["UUID"] == through.gpus[0].gpu_uuid
        assert series["job"].startswith("dcgm-") and "exported_namespace" not in series

        # Under the simulated load (60-95 %, steady within a minute) the two still agree.
        _force(live_cluster, None)
        kubesim.set_ray_driver(live_cluster.namespace, live_cluster.name, "active")
        wait_for(
            lambda: any(g.utilization >= 60 for g in _through(url, live_cluster).gpus),
            timeout=60,
            what="Prometheus to see the GPU busy",
        )
        direct, through = _agrees(url, live_cluster)
        assert [(g.pod, g.gpu_uuid) for g in through.gpus] == [
            (g.pod, g.gpu_uuid) for g in direct.gpus
        ]
        assert all(60 <= g.utilization <= 95 for g in through.gpus)


def test_prometheus_reading_of_labels_renamed_exported(
    live_cluster: ClusterRequest, kubesim: KubeSim, tmp_path: Path
) -> None:
    _force(live_cluster, str(FORCED))
    first, nodes = _worker_nodes(live_cluster)
    # The target labels a ServiceMonitor gives the exporter's own pod: without
    # honor_labels they win, and the exporter's mapping is kept as exported_*.
    exporter = {
        "namespace": "gpu-operator",
        "pod": "nvidia-dcgm-exporter-x7k2p",
        "container": "nvidia-dcgm-exporter",
    }
    config = scrape_config(
        f"127.0.0.1:{kubesim.port}", nodes, honor_labels=False, target_labels=exporter
    )
    with prometheus(tmp_path / "prometheus", config) as port:
        url = f"http://127.0.0.1:{port}"
        _, through = _agrees(url, live_cluster)
        assert through.error == "" and [(g.pod, g.gpu_uuid) for g in through.gpus] == [
            (g.pod, g.gpu_uuid) for g in first.gpus
        ]
        assert all(g.utilization == FORCED for g in through.gpus)
        promql = f'DCGM_FI_DEV_GPU_UTIL{{exported_namespace="{live_cluster.namespace}"}}'
        [series] = [r["metric"] for r in _query(port, promql)]
        assert series["namespace"] == "gpu-operator"
        assert series["exported_pod"] == through.gpus[0].pod


def test_an_unreachable_or_wrong_prometheus_is_an_error_not_an_exception(
    live_cluster: ClusterRequest, kubesim: KubeSim
) -> None:
    _worker_nodes(live_cluster)
    closed = f"http://127.0.0.1:{free_port()}"
    reading = _through(closed, live_cluster)
    assert reading.gpus == []
    assert reading.error.startswith("GPU utilisation could not be read from Prometheus: ")
    assert "refused" in reading.error.lower()
    # A server that is not a Prometheus (kubesim has no /api/v1/query).
    reading = _through(kubesim.url, live_cluster)
    assert reading.gpus == []
    assert reading.error == (
        "GPU utilisation could not be read from Prometheus: Prometheus answered 404"
    )
