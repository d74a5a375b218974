"""Server-side printing of custom kinds as kubectl (1.37 and 1.32) shows it: the CRDs'
printer columns, JSONPath filters included, typed as kube-apiserver types them. A queued
RayJob is admitted and finishes under Kueue (manual clock), then kubectl lists what it made."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubesim_helpers import rayjob
from test_kubesim_kueue import KQ, setup_queues

from kubesim import KubeSim
from kubesim.clock import ManualClock

Run = Callable[..., subprocess.CompletedProcess[str]]
NS = "t-a"


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    """Kueue on, on a manual clock: the RayJob runs exactly as long as the test says."""
    s = KubeSim(kueue=True, clock=ManualClock()).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def finished(sim: KubeSim, kube_api: client.ApiClient) -> str:
    """A queued RayJob that was admitted and has finished; its Workload's name."""
    custom, core = client.CustomObjectsApi(kube_api), client.CoreV1Api(kube_api)
    setup_queues(custom, core)
    job = rayjob(
        "done",
        NS,
        labels={"kueue.x-k8s.io/queue-name": "lq"},
        annotations={"kubesim.io/job-run-seconds": "3"},
        shutdownAfterJobFinishes=True,
        ttlSecondsAfterFinished=600,  # the RayCluster stays to be listed
    )
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", job)
    clock = sim.cluster.clock
    assert isinstance(clock, ManualClock)
    clock.advance(5)
    sim.cluster.tick()
    items = custom.list_namespaced_custom_object(*KQ, NS, "workloads")["items"]
    assert len(items) == 1
    conditions = {c["type"]: c["status"] for c in items[0]["status"]["conditions"]}
    assert conditions["Admitted"] == conditions["Finished"] == "True"
    return str(items[0]["metadata"]["name"])


def _table(out: str) -> list[dict[str, str]]:
    """kubectl's columns, split where the header's words start."""
    lines = out.rstrip("\n").splitlines()
    header = lines[0]
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " ")]
    # Two-word column names ("RESERVED IN") are one column: kubectl pads columns by 3.
    starts = [s for s in starts if s == 0 or header[s - 2 : s] == "  "]
    bounds = [*starts[1:], None]
    names = [header[s:e].strip() for s, e in zip(starts, bounds, strict=True)]
    return [
        {n: line[s:e].strip() for n, s, e in zip(names, starts, bounds, strict=True)}
        for line in lines[1:]
    ]


def test_get_workloads_shows_admitted_and_finished(kubectl_any: Run, finished: str) -> None:
    proc = kubectl_any("get", "workloads", "-n", NS)
    assert proc.returncode == 0, proc.stderr
    rows = _table(proc.stdout)
    assert list(rows[0]) == ["NAME", "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED", "AGE"]
    assert rows[0]["NAME"] == finished
    assert (rows[0]["QUEUE"], rows[0]["RESERVED IN"]) == ("lq", "cq-a")
    assert (rows[0]["ADMITTED"], rows[0]["FINISHED"]) == ("True", "True")
    assert rows[0]["AGE"].endswith("s")


def test_get_ray_and_queue_kinds_show_their_columns(kubectl_any: Run, finished: str) -> None:
    proc = kubectl_any("get", "rayjobs,rayclusters", "-n", NS)
    assert proc.returncode == 0, proc.stderr
    blocks = proc.stdout.strip().split("\n\n")
    jobs, clusters = _table(blocks[0]), _table(blocks[1])
    assert list(jobs[0])[:4] == ["NAME", "JOB STATUS", "DEPLOYMENT STATUS", "RAY CLUSTER NAME"]
    assert (jobs[0]["JOB STATUS"], jobs[0]["DEPLOYMENT STATUS"]) == ("SUCCEEDED", "Complete")
    assert f"raycluster.ray.io/{jobs[0]['RAY CLUSTER NAME']}" == clusters[0]["NAME"]
    assert jobs[0]["START TIME"].endswith("Z") and jobs[0]["END TIME"].endswith("Z")
    assert list(clusters[0]) == [
        "NAME",
        "DESIRED WORKERS",
        "AVAILABLE WORKERS",
        "CPUS",
        "MEMORY",
        "GPUS",
        "STATUS",
        "AGE",
    ]
    assert (clusters[0]["DESIRED WORKERS"], clusters[0]["GPUS"]) == ("1", "1")
    assert clusters[0]["STATUS"] == "ready"

    proc = kubectl_any("get", "clusterqueues,localqueues", "-A", "-o", "wide")
    assert proc.returncode == 0, proc.stderr
    cqs_block, lqs_block = proc.stdout.strip().split("\n\n")
    cqs = {row["NAME"].split("/")[1]: row for row in _table(cqs_block)}
    assert list(cqs["cq-a"]) == [
        "NAME",
        "COHORT",
        "STRATEGY",
        "PENDING WORKLOADS",
        "ADMITTED WORKLOADS",
    ]
    assert cqs["cq-a"]["PENDING WORKLOADS"] == "0"
    assert cqs["cq-a"]["COHORT"] == ""  # no cohortName: a null cell prints empty
    lqs = {row["NAMESPACE"]: row for row in _table(lqs_block)}
    assert lqs[NS]["NAME"] == "localqueue.kueue.x-k8s.io/lq"
    assert lqs[NS]["CLUSTERQUEUE"] == "cq-a"
    assert lqs[NS]["PENDING WORKLOADS"] == "0"


def test_table_cells_are_typed(finished: str, kube_api: client.ApiClient) -> None:
    """The Table itself, as kubectl asks for it: integer cells are numbers, a missing value
    is null, a date is an age (asked twice: the column definitions are not altered)."""

    def table(path: str) -> dict[str, Any]:
        resp = kube_api.rest_client.pool_manager.request(
            "GET",
            kube_api.configuration.host + path,
            headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        )
        out: dict[str, Any] = json.loads(resp.data)
        return out

    table(f"/apis/ray.io/v1/namespaces/{NS}/rayclusters")
    clusters = table(f"/apis/ray.io/v1/namespaces/{NS}/rayclusters")
    columns = [c["name"] for c in clusters["columnDefinitions"]]
    cells = dict(zip(columns, clusters["rows"][0]["cells"], strict=True))
    assert cells["desired workers"] == 1 and isinstance(cells["desired workers"], int)
    assert cells["gpus"] == "1"
    assert cells["age"].endswith("s")
    age = next(c for c in clusters["columnDefinitions"] if c["name"] == "age")
    assert age["type"] == "date"
    ip = next(c for c in clusters["columnDefinitions"] if c["name"] == "head pod IP")
    assert (ip["priority"], ip["type"]) == (1, "string")
    queues = table("/apis/kueue.x-k8s.io/v1beta2/clusterqueues")
    cells = dict(
        zip(
            [c["name"] for c in queues["columnDefinitions"]],
            queues["rows"][0]["cells"],
            strict=True,
        )
    )
    assert cells["Cohort"] is None  # not set: a null cell, as the API server sends it
    assert cells["Pending Workloads"] == 0


BUILT_INS = """
apiVersion: v1
kind: ConfigMap
metadata: {name: c1, namespace: p}
data: {a: "1", b: "2"}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: q, namespace: p}
spec: {hard: {requests.cpu: "2", limits.cpu: "4", pods: "10"}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: np, namespace: p}
spec:
  podSelector:
    matchLabels: {app: ray}
    matchExpressions: [{key: tier, operator: In, values: [gpu, cpu]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: rb, namespace: p}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects:
- {kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}
- {kind: ServiceAccount, name: bot, namespace: p}
---
apiVersion: v1
kind: PodTemplate
metadata: {name: pt, namespace: p}
template:
  metadata: {labels: {b: "2", a: "1"}}
  spec: {containers: [{name: c, image: busybox}, {name: d, image: nginx}]}
"""


def test_built_in_kinds_print_the_api_servers_columns(kubectl_any: Run) -> None:
    assert kubectl_any("create", "namespace", "p").returncode == 0
    proc = kubectl_any("apply", "-f", "-", stdin=BUILT_INS)
    assert proc.returncode == 0, proc.stderr
    proc = kubectl_any(
        "get",
        "cm/c1",
        "quota/q",
        "netpol/np",
        "rolebinding/rb",
        "podtemplate/pt",
        "-n",
        "p",
        "-o",
        "wide",
    )
    assert proc.returncode == 0, proc.stderr
    cm, quota, netpol, binding, template = (
        _table(block)[0] for block in proc.stdout.strip().split("\n\n")
    )
    assert (cm["NAME"], cm["DATA"]) == ("configmap/c1", "2")
    assert quota["REQUEST"] == "pods: 0/10, requests.cpu: 0/2"
    assert quota["LIMIT"] == "limits.cpu: 0/4"
    assert netpol["POD-SELECTOR"] == "app=ray,tier in (cpu,gpu)"
    assert (binding["ROLE"], binding["USERS"], binding["SERVICEACCOUNTS"]) == (
        "ClusterRole/view",
        "alice",
        "p/bot",
    )
    assert (template["CONTAINERS"], template["IMAGES"], template["POD LABELS"]) == (
        "c,d",
        "busybox,nginx",
        "a=1,b=2",
    )


def test_wide_columns_of_nodes_services_and_jobs(kubectl_any: Run) -> None:
    proc = kubectl_any("get", "nodes", "-o", "wide")
    assert proc.returncode == 0, proc.stderr
    node = _table(proc.stdout)[0]
    assert list(node)[5:] == [
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ]
    assert node["EXTERNAL-IP"] == "<none>" and node["INTERNAL-IP"].count(".") == 3
    for args in (
        ("create", "service", "nodeport", "web", "--tcp=80:8080"),
        ("create", "job", "once", "--image=busybox"),
    ):
        assert kubectl_any(*args).returncode == 0
    proc = kubectl_any("get", "service/web", "job/once", "-o", "wide")
    assert proc.returncode == 0, proc.stderr
    service, job = (_table(block)[0] for block in proc.stdout.strip().split("\n\n"))
    assert service["PORT(S)"].startswith("80:") and service["PORT(S)"].endswith("/TCP")
    assert (service["EXTERNAL-IP"], service["SELECTOR"]) == ("<none>", "app=web")
    assert (job["CONTAINERS"], job["IMAGES"]) == ("once", "busybox")
    assert job["SELECTOR"].startswith("batch.kubernetes.io/controller-uid=")
