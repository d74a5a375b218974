"""How busy a cluster's GPUs are: per-GPU utilisation and memory from NVIDIA's DCGM exporter.

The exporter (a DaemonSet, one per GPU node, ``:9400/metrics``) labels each GPU's series
with the pod holding it (``namespace``, ``pod``, ``container``). Two ways to it:

* by default, each node the request's pods run on is read through the API server's node
  proxy (``nodes/{node}:{DCGM_EXPORTER_PORT}/proxy/metrics``: an exporter that listens on
  the node's address, as kubesim's does) and its text format parsed;
* with ``PROMETHEUS_URL``, one instant query per metric on Prometheus's query API
  (``DCGM_FI_DEV_GPU_UTIL{namespace="..."}``; a scrape that renamed the pod labels to
  ``exported_*`` is read too).

Only series of the request's own pods are kept. docs/gpu-utilization.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import urlencode

import urllib3
from django.conf import settings

from clusters.kube.gateway import Gateway, KubeError, TransientKubeError
from clusters.models import ClusterRequest

UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
# A node's exporter answer is a few kilobytes per GPU with the default metric set.
_MAX_ANSWER = 4 * 1024 * 1024
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')
_http = urllib3.PoolManager()


@dataclass(frozen=True)
class WorkerGpu:
    """One GPU of one of the request's pods, as read now."""

    pod: str
    gpu_uuid: str
    utilization: int
    memory_used_mib: int


@dataclass(frozen=True)
class GpuReading:
    """The request's GPUs as read now, or ``error`` in plain words."""

    gpus: list[WorkerGpu]
    error: str = ""


def parse_exposition(text: str) -> list[tuple[str, dict[str, str], float]]:
    """The samples of a Prometheus text-format answer: (metric, labels, value)."""
    out = []
    for line in text.splitlines():
        found = _SAMPLE.match(line.strip())
        if found is None or line.startswith("#"):
            continue
        labels = {
            m.group(1): m.group(2).replace('\\"', '"').replace("\\\\", "\\")
            for m in _LABEL.finditer(found.group(2) or "")
        }
        try:
            out.append((found.group(1), labels, float(found.group(3))))
        except ValueError:
            continue
    return out


def _owner(labels: dict[str, str]) -> tuple[str, str]:
    """(namespace, pod) of a series, whether or not a scrape renamed them ``exported_*``."""
    namespace = labels.get("exported_namespace") or labels.get("namespace", "")
    pod = labels.get("exported_pod") or labels.get("pod", "")
    return namespace, pod


def _fold(
    samples: list[tuple[str, dict[str, str], float]], namespace: str, pods: set[str]
) -> list[WorkerGpu]:
    """The request's GPUs among ``samples``, by pod then UUID."""
    found: dict[tuple[str, str], dict[str, float]] = {}
    for metric, labels, value in samples:
        if metric not in (UTIL, FB_USED):
            continue
        ns, pod = _owner(labels)
        if ns != namespace or pod not in pods:
            continue
        found.setdefault((pod, labels.get("UUID", labels.get("gpu", ""))), {})[metric] = value
    return [
        WorkerGpu(pod, uuid, round(v.get(UTIL, 0.0)), round(v.get(FB_USED, 0.0)))
        for (pod, uuid), v in sorted(found.items())
    ]


def _pods(gw: Gateway, cluster: ClusterRequest) -> dict[str, str]:
    """The request's running pods that hold GPUs, by name, with their node."""
    pods = gw.list(
        "v1", "Pod", namespace=cluster.namespace, label_selector=f"ray.io/cluster={cluster.name}"
    )
    out = {}
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        node = (pod.get("spec") or {}).get("nodeName") or ""
        if labels.get("ray.io/node-type") != "head" and node:
            out[pod["metadata"]["name"]] = node
    return out


def _from_nodes(
    gw: Gateway, nodes: set[str]
) -> tuple[list[tuple[str, dict[str, str], float]], str]:
    samples, errors = [], []
    for node in sorted(nodes):
        try:
            status, body = gw.node_proxy_get(
                node, settings.DCGM_EXPORTER_PORT, "metrics", limit=_MAX_ANSWER
            )
        except TransientKubeError as exc:
            errors.append(f"the DCGM exporter on {node} was not read: {exc}")
            continue
        if status != 200:
            errors.append(f"the DCGM exporter on {node} answered {status}")
            continue
        samples += parse_exposition(body.decode("utf-8", errors="replace"))
    return samples, "; ".join(errors)


def _from_prometheus(namespace: str) -> list[tuple[str, dict[str, str], float]]:
    """Both metrics of ``namespace`` from Prometheus's instant query API."""
    samples = []
    for metric in (UTIL, FB_USED):
        query = (
            f'{metric}{{namespace="{namespace}"}} or {metric}{{exported_namespace="{namespace}"}}'
        )
        url = f"{settings.PROMETHEUS_URL.rstrip('/')}/api/v1/query?{urlencode({'query': query})}"
        answer = _http.request("GET", url, timeout=urllib3.Timeout(total=10), retries=False)
        if answer.status != 200:
            raise ValueError(f"Prometheus answered {answer.status}")
        data = json.loads(answer.data)
        for item in (data.get("data") or {}).get("result") or []:
            labels = dict(item.get("metric") or {})
            samples.append((str(labels.get("__name__", metric)), labels, float(item["value"][1])))
    return samples


def read_gpu_utilization(gw: Gateway, cluster: ClusterRequest) -> GpuReading:
    """The request's GPUs as the DCGM exporter reports them now (see the module)."""
    try:
        pods = _pods(gw, cluster)
        if not pods:
            return GpuReading([])
        if settings.PROMETHEUS_URL:
            samples, error = _from_prometheus(cluster.namespace), ""
        else:
            samples, error = _from_nodes(gw, set(pods.values()))
    except KubeError as exc:
        return GpuReading([], error=f"GPU utilisation could not be read: {exc}")
    except (urllib3.exceptions.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        return GpuReading([], error=f"GPU utilisation could not be read from Prometheus: {exc}")
    return GpuReading(_fold(samples, cluster.namespace, set(pods)), error=error)
