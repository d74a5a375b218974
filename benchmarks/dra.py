"""GPUs through DRA against the device plugin's extended resource, at the large fleet's size.

kubesim's large fleet (64 nodes of 8 x H100, 32 x 1 L4, 16 CPU nodes) twice: as it is (the
device plugin's ``nvidia.com/gpu``), and with its H100s managed by the simulated NVIDIA DRA
driver, half of them split into MIG 1g.10gb x 7 and half handed out as whole GPUs. Measured:

* kubesim scheduling: pods created one after the other through the official client over
  HTTP, each with a ``nvidia.com/gpu`` limit, or a claim from a ResourceClaimTemplate as
  gangway's DRA flavors write it (clusters/kube/dra.py) for one whole GPU or one MIG slice;
  latency per pod and pods bound per second. kubesim runs in its own process, as the API
  server of a real cluster would (benchmarks.support.kubesim_process).
* the admission pass (pure ``clusters.admission.decide``) on benchmarks.admission's seeded
  queue, with one extended H100 flavor, and with the same fleet as two DRA flavors (whole
  GPUs and 1g.10gb slices, each with its own quotas).

``--quick`` runs a tiny fleet (the smoke test); ``--json PATH`` writes the figures too.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import time
from collections import Counter
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from benchmarks.admission import H100_NODES, build
from benchmarks.support import kubesim_process, load_line
from clusters.admission import FlavorQ, QuotaQ, Snapshot, decide
from clusters.domain.shapes import FlavorSpec
from clusters.kube import dra
from kubesim.fleet import FLEET_DIR, load_fleet

NAMESPACE = "bench"
H100 = "NVIDIA-H100-80GB-HBM3"
MIG_PROFILE = "1g.10gb"
SLICES_PER_GPU = 7
# The claims' shapes, as tenants.models.GpuFlavor.dra_device_class / dra_selectors make them.
WHOLE = FlavorSpec(
    name="h100-dra",
    gpu_product=H100,
    gpus_per_node=8,
    cpu_per_node=192,
    memory_per_node_gib=1800,
    sharing=False,
    device_class="gpu.nvidia.com",
)
SLICE = replace(
    WHOLE,
    name="h100-1g",
    gpus_per_node=8 * SLICES_PER_GPU,
    device_class="mig.nvidia.com",
    device_selectors=(f'device.attributes["gpu.nvidia.com"].profile == "{MIG_PROFILE}"',),
    mig_profile=MIG_PROFILE,
)
TEMPLATES = {"whole": "one-gpu", "slice": "one-slice"}


@dataclass(frozen=True)
class Size:
    """How large a run is: the scheduling fleet's H100 nodes (half of them MIG-partitioned
    in the DRA fleet) and other pools' nodes, pods per scheduling run, and the admission
    queues (on benchmarks.admission's fleet: 64 H100 nodes)."""

    h100: int
    l4: int
    cpu: int
    pods: int
    queues: tuple[int, ...]
    runs: int


# 24 pods a run: at 64 nodes kubesim takes over half a second to place one claim (see the
# section), and make bench's run of this benchmark stays under two minutes.
FULL = Size(h100=64, l4=32, cpu=16, pods=24, queues=(1_500, 15_000), runs=3)
QUICK = Size(h100=8, l4=2, cpu=2, pods=8, queues=(300,), runs=1)


def fleets(size: Size) -> dict[str, dict[str, Any]]:
    """The large fleet's H100, L4 and CPU pools at ``size`` (not its GB200s): with the device
    plugin (``extended``) and with the DRA driver on its H100s (``dra``: half in MIG
    slices, half whole)."""
    large = load_fleet(os.path.join(FLEET_DIR, "large.yaml"))
    counts = {"h100": size.h100, "l4": size.l4, "cpu": size.cpu}
    pools = [{**p, "count": counts[p["name"]]} for p in large["pools"] if p["name"] in counts]
    extended = {**large, "name": "ext", "pools": pools}
    (h100,) = [p for p in pools if p["name"] == "h100"]
    plain = {k: v for k, v in h100["allocatable"].items() if k != "nvidia.com/gpu"}
    half = size.h100 // 2
    managed = [
        {**h100, "name": "h100-mig", "count": half, "allocatable": plain,
         "mig": {"profile": MIG_PROFILE, "perGpu": SLICES_PER_GPU}},
        {**h100, "name": "h100-dra", "count": size.h100 - half, "allocatable": plain},
    ]  # fmt: skip
    others = [p for p in pools if p["name"] != "h100"]
    return {"extended": extended, "dra": {**large, "name": "dra", "pools": managed + others}}


def worker_pod(index: int, claim: str) -> dict[str, Any]:
    """A Ray GPU worker as gangway shapes one: an ``nvidia.com/gpu`` limit (``claim``
    ``"gpu"``), or a claim from the ``whole`` or ``slice`` template."""
    container: dict[str, Any] = {
        "name": "ray-worker",
        "image": "rayproject/ray:2.40.0",
        "resources": {"requests": {"cpu": "2", "memory": "16Gi"}},
    }
    spec: dict[str, Any] = {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "nodeSelector": {"nvidia.com/gpu.product": H100},
        "containers": [container],
    }
    if claim == "gpu":
        container["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    else:
        dra.claim_from_template(spec, container, TEMPLATES[claim])
    return {"metadata": {"name": f"w-{claim}-{index:05d}"}, "spec": spec}


def schedule(fleet: dict[str, Any], claim: str, pods: int) -> dict[str, Any]:
    """Create ``pods`` workers one at a time on a fresh kubesim with ``fleet``: each
    create's latency (kubesim schedules, allocates the claim and binds within it), and how
    many were bound when their create returned and once all were made."""
    from kubernetes import client, config

    with kubesim_process(fleet) as sim:
        api = config.new_client_from_config(config_file=sim.kubeconfig)
        try:
            core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
            core.create_namespace({"metadata": {"name": NAMESPACE}})
            for flavor, name in ((WHOLE, TEMPLATES["whole"]), (SLICE, TEMPLATES["slice"])):
                template = dra.claim_template(
                    name=name, namespace=NAMESPACE, labels={}, flavor=flavor, count=1
                )
                resource.create_namespaced_resource_claim_template(NAMESPACE, template)
            latencies, at_once = [], 0
            started = time.perf_counter()
            for i in range(pods):
                began = time.perf_counter()
                made = core.create_namespaced_pod(NAMESPACE, worker_pod(i, claim))
                latencies.append(time.perf_counter() - began)
                at_once += bool(made.spec.node_name)
            wall = time.perf_counter() - started
            listed = core.list_namespaced_pod(NAMESPACE, _preload_content=False)
            items = json.loads(listed.data)["items"]
        finally:
            api.close()
    bound = [p for p in items if p["spec"].get("nodeName")]
    return {
        "claim": claim,
        "pods": pods,
        "bound": len(bound),
        "bound_at_create": at_once,
        "pools": dict(Counter(p["spec"]["nodeName"].rsplit("-", 1)[0] for p in bound)),
        "seconds": wall,
        "pods_per_second": pods / wall,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * _percentile(latencies, 0.99),
    }


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def dra_snapshot(snap: Snapshot, h100_nodes: int) -> Snapshot:
    """``snap`` (one extended H100 flavor) with its H100s split as the DRA fleet is: half
    whole GPUs (``h100-dra``: production clusters), half 1g.10gb slices (``h100-1g``: dev
    clusters, a slice per GPU they asked for). Each tenant's H100 quota is split the same
    way, its half in slices counted seven to a GPU."""
    half = h100_nodes // 2

    def moved(item: Any) -> Any:
        if item.flavor != "h100":
            return item
        return replace(item, flavor=WHOLE.name if item.kind == "prod" else SLICE.name)

    running = [moved(r) for r in snap.running]
    pending = [moved(p) for p in snap.pending]
    used = Counter[str]()
    for r in running:
        used[r.flavor] += r.gpus
    quotas = []
    for q in snap.quotas:
        if q.flavor != "h100":
            quotas.append(q)
            continue
        quotas.append(QuotaQ(q.tenant, WHOLE.name, q.gpus // 2, q.borrow_limit // 2))
        slices = SLICES_PER_GPU * (q.gpus // 2)
        quotas.append(QuotaQ(q.tenant, SLICE.name, slices, SLICES_PER_GPU * q.borrow_limit // 2))
    flavors = [f for f in snap.flavors if f.name != "h100"]
    for spec, nodes in ((WHOLE, h100_nodes - half), (SLICE, half)):
        free = max(Decimal(spec.gpus_per_node * nodes) - used[spec.name], Decimal(0))
        flavors.append(FlavorQ(spec.name, spec.gpus_per_node, nodes, free_gpus=free))
    return replace(snap, flavors=flavors, quotas=quotas, running=running, pending=pending)


def admission(size: Size) -> list[dict[str, Any]]:
    """One pass per queue size and world: the median seconds, admitted, reasons."""
    out = []
    for waiting in size.queues:
        extended = build(waiting)
        for world, snap in (("extended", extended), ("dra", dra_snapshot(extended, H100_NODES))):
            gc.collect()
            samples = []
            for _ in range(size.runs):
                began = time.perf_counter()
                decision = decide(snap)
                samples.append(time.perf_counter() - began)
            admitted = Counter(decision.placed[i] for i in decision.admitted)
            out.append(
                {
                    "world": world,
                    "waiting": waiting,
                    "seconds": statistics.median(samples),
                    "admitted": dict(admitted),
                    "free": {f.name: int(f.free_gpus or 0) for f in snap.flavors},
                    "reasons": dict(Counter(s.reason for s in decision.waiting.values())),
                }
            )
    return out


def measure(size: Size) -> dict[str, Any]:
    """Every figure of one run."""
    worlds = fleets(size)
    scheduling = [
        schedule(worlds["extended"], "gpu", size.pods),
        schedule(worlds["dra"], "whole", size.pods),
        schedule(worlds["dra"], "slice", size.pods),
    ]
    return {"size": size.__dict__, "scheduling": scheduling, "admission": admission(size)}


LABELS = {
    "gpu": "`nvidia.com/gpu: 1` limit (device plugin)",
    "whole": "claim: 1 whole GPU (`gpu.nvidia.com`)",
    "slice": "claim: 1 MIG 1g.10gb slice (`mig.nvidia.com`)",
}


def section(figures: dict[str, Any]) -> str:
    """The markdown section of ``figures``."""
    size = figures["size"]
    half = size["h100"] // 2
    rows = [
        f"| {LABELS[s['claim']]} | {s['bound']:,} of {s['pods']:,} "
        f"({s['bound_at_create']:,} at create) | {s['pods_per_second']:,.0f} pods/s | "
        f"{s['p50_ms']:.1f} ms | {s['p99_ms']:.1f} ms | "
        f"{', '.join(f'{k} {v}' for k, v in sorted(s['pools'].items()))} |"
        for s in figures["scheduling"]
    ]
    passes = [
        f"| {a['waiting']:,} | {a['world']}: "
        f"{', '.join(f'{k} {v:,} free' for k, v in sorted(a['free'].items()))} | "
        f"{1000 * a['seconds']:,.0f} ms | "
        f"{', '.join(f'{k} {v:,}' for k, v in sorted(a['admitted'].items()))} | "
        f"{', '.join(f'{k} {v:,}' for k, v in Counter(a['reasons']).most_common())} |"
        for a in figures["admission"]
    ]
    cpu = _cpu_model()
    return "\n".join(
        [
            "## DRA: device claims against the extended resource",
            "",
            f"kubesim's large fleet at {size['h100']} nodes of 8 x H100 ({size['l4']} L4 and "
            f"{size['cpu']} CPU nodes beside), once with the device plugin's `nvidia.com/gpu` "
            f"and once with NVIDIA's simulated DRA driver on the H100s: {half} nodes in MIG "
            f"1g.10gb x 7 ({half * 56:,} slices) and {size['h100'] - half} handed out as "
            f"whole GPUs ({(size['h100'] - half) * 8:,}). Machine: {cpu}, "
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}.",
            "",
            "### kubesim scheduling",
            "",
            f"{size['pods']:,} GPU workers created one after the other through the official "
            "client over HTTP, kubesim in its own process; a claim comes from a "
            "ResourceClaimTemplate as clusters/kube/dra.py writes it, so each create also "
            "makes the pod's ResourceClaim and allocates it (CEL selectors over every "
            "device of the candidate nodes, MIG slices on their GPU's counters). Latency is "
            "the create call's (kubesim schedules and binds within it); p99 of "
            f"{size['pods']} is about the slowest.",
            "",
            "| workers ask for | bound | throughput | p50 per pod | p99 per pod | nodes by pool |",
            "|---|---:|---:|---:|---:|---|",
            *rows,
            "",
            _placement_note(figures["scheduling"]),
            "",
            "### Admission pass (pure `clusters.admission.decide`)",
            "",
            "benchmarks.admission's seeded queue and nearly full fleet (30 tenants, 3 cohorts, "
            "capacity-aware), with one extended `h100` flavor, and with the same H100s as two "
            "DRA flavors: `h100-dra` (whole GPUs: the production clusters) and `h100-1g` "
            "(slices: the dev clusters, one slice per GPU asked), each tenant's H100 quota "
            f"split between them (slices counted 7 to a GPU). Median of {size['runs']} runs.",
            "",
            "| waiting | flavors (free devices) | one pass | admitted by flavor | "
            "left waiting, by reason |",
            "|---:|---|---:|---|---|",
            *passes,
            "",
            _admission_note(figures["admission"]),
        ]
    )


def _placement_note(runs: list[dict[str, Any]]) -> str:
    """What the figures say about where whole-GPU claims went."""
    (whole,) = [s for s in runs if s["claim"] == "whole"]
    on_mig = whole["pools"].get("dra-h100-mig", 0)
    slower = [s["p50_ms"] for s in runs if s["claim"] != "gpu"]
    (plain,) = [s["p50_ms"] for s in runs if s["claim"] == "gpu"]
    low, high = round(min(slower) / plain), round(max(slower) / plain)
    ratio = f"{low}x" if low == high else f"{low}-{high}x"
    return (
        f"A claim costs {ratio} a `nvidia.com/gpu` pod at the median: for each pod kubesim's "
        "allocator still walks every candidate node's devices and the cluster's claims "
        "(each device's conversion and selector verdicts are remembered per slice version; "
        f"kubesim/dra/allocator.py). {on_mig} of the {whole['pods']} whole-GPU claims went to the "
        "MIG-partitioned nodes: a partitioned GPU is also a whole device there (partitionable "
        "devices), and a whole-GPU claim takes its seven slices with it; nothing in the "
        "device tells the two pools apart (docs/dra.md, Limits)."
    )


def _admission_note(passes: list[dict[str, Any]]) -> str:
    """The DRA world's pass time against the extended one's, per queue size."""
    by = {(a["world"], a["waiting"]): a for a in passes}
    ratios = ", ".join(
        f"{by['dra', n]['seconds'] / by['extended', n]['seconds']:.2f}x at {n:,}"
        for n in sorted({a["waiting"] for a in passes})
    )
    return (
        f"The pass with the DRA flavors takes {ratios} the extended one's time: a DRA or MIG "
        "flavor is one more flavor to it, and the cost follows the queue, not how devices "
        "are requested. It admits more dev clusters there because the running dev clusters "
        "hold slices, a seventh of a GPU each, and leave most slices free. " + load_line()
    )


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run(argv: list[str] | None = None) -> str:
    """Measure (``--quick``: the tiny fleet) and return the markdown section."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dra")
    parser.add_argument("--quick", action="store_true", help="a tiny fleet (the smoke test)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv or [])
    figures = measure(QUICK if args.quick else FULL)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(figures, fh, indent=1)
    return section(figures)


if __name__ == "__main__":
    import sys

    print(run(sys.argv[1:]))
