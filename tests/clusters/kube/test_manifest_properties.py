"""Property tests over random flavors and requests: the GPU-safety rules of DESIGN hold
for every shape the validation lets through. No database: rows are plain objects."""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace
from typing import Any

from django.core.exceptions import ValidationError
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from clusters.domain import request_validation, shapes
from clusters.kinds.raycluster.manifests import raycluster

VOID = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

flavors = st.builds(
    SimpleNamespace,
    name=st.from_regex(r"[a-z][a-z0-9]{0,11}", fullmatch=True),
    gpu_product=st.from_regex(r"NVIDIA-[A-Z0-9]{1,8}(-[0-9]{2}GB)?", fullmatch=True),
    gpus_per_node=st.integers(1, 64),
    cpu_per_node=st.integers(1, 4096),
    memory_per_node_gib=st.integers(1, 65536),
    node_count=st.integers(0, 100),
    sharing=st.booleans(),
)
TENANT = SimpleNamespace(slug="acme", namespace="gw-acme", dev_ttl_hours=8, max_ttl_hours=72, pk=1)


@st.composite
def requests(draw: Any) -> Any:
    flavor = draw(flavors)
    kind = draw(st.sampled_from(["dev", "prod"]))
    workers = draw(st.integers(1, 16))
    min_workers = max_workers = fraction = None
    if kind == "prod" and draw(st.booleans()):
        min_workers = draw(st.integers(0, workers))
        max_workers = draw(st.integers(workers, workers + 8))
    if kind == "dev" and flavor.sharing and draw(st.booleans()):
        fraction = Decimal(draw(st.integers(1, 999))) / 1000
    cluster = SimpleNamespace(
        pk=draw(st.integers(1, 10**6)),
        name="c" + draw(st.from_regex(r"[a-z0-9]{0,20}", fullmatch=True)),
        tenant=TENANT,
        owner=SimpleNamespace(username=draw(st.sampled_from(["bob", "a.b+c@x", "Z" * 200]))),
        flavor=flavor,
        kind=kind,
        workers=workers,
        min_workers=min_workers,
        max_workers=max_workers,
        gpu_fraction=fraction,
        image="",
    )
    try:
        request_validation.validate_request(
            tenant=TENANT,
            flavor=flavor,
            kind=kind,
            workers=workers,
            min_workers=min_workers,
            max_workers=max_workers,
            gpu_fraction=fraction,
            ttl_hours=None,
            name=cluster.name,
            image=None,
            kai_enabled=True,
        )
    except ValidationError:
        assume(False)
    return cluster


def _cpu(value: str) -> Decimal:
    return Decimal(value[:-1]) / 1000 if value.endswith("m") else Decimal(value)


def _gib(value: str) -> Decimal:
    return Decimal(value[:-2]) / 1024 if value.endswith("Mi") else Decimal(value[:-2])


def _pods(obj: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(group, pod template)`` for the head and every worker group."""
    head = obj["spec"]["headGroupSpec"]
    return [(head, head["template"])] + [
        (g, g["template"]) for g in obj["spec"]["workerGroupSpecs"]
    ]


def _walk(value: Any) -> Any:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def _is_kai_fraction(template: dict[str, Any], index: int) -> bool:
    # KAI gives the fraction to container 0 and sets its visible device itself.
    annotations = template["metadata"].get("annotations", {})
    return (
        "gpu-fraction" in annotations
        and template["spec"].get("schedulerName") == "kai-scheduler"
        and index == 0
    )


@settings(max_examples=150, deadline=None)
@given(requests())
def test_gpu_safety_rules(cluster: Any) -> None:
    obj = raycluster(cluster, kai_enabled=True)
    flavor = cluster.flavor
    for group, template in _pods(obj):
        spec = template["spec"]
        gpu_pod = False
        for index, container in enumerate(spec["containers"]):
            gpus = container["resources"]["limits"].get("nvidia.com/gpu")
            if gpus is None and not _is_kai_fraction(template, index):
                assert VOID in container.get("env", []), container["name"]
            if gpus is not None or _is_kai_fraction(template, index):
                gpu_pod = True
            if gpus is not None:
                assert container["resources"]["requests"]["nvidia.com/gpu"] == gpus
                assert group["rayStartParams"]["num-gpus"] == gpus
        if gpu_pod:
            assert TOLERATION in spec["tolerations"]
            assert spec["nodeSelector"] == {"nvidia.com/gpu.product": flavor.gpu_product}
        else:
            assert "tolerations" not in spec and "nodeSelector" not in spec
            assert group["rayStartParams"]["num-gpus"] == "0"
    if "autoscalerOptions" in obj["spec"]:
        assert VOID in obj["spec"]["autoscalerOptions"]["env"]
    for key, value in _walk(obj):
        assert key not in {"hostPath", "hostNetwork", "hostPID", "hostIPC"}
        if key == "privileged":
            assert value is False
        if key == "allowPrivilegeEscalation":
            assert value is False


@settings(max_examples=150, deadline=None)
@given(requests())
def test_a_prod_worker_never_asks_for_more_than_a_node(cluster: Any) -> None:
    assume(cluster.kind == "prod")
    flavor = cluster.flavor
    for group in raycluster(cluster)["spec"]["workerGroupSpecs"]:
        limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert int(limits["nvidia.com/gpu"]) == flavor.gpus_per_node
        assert 0 < _cpu(limits["cpu"]) <= flavor.cpu_per_node
        assert 0 < _gib(limits["memory"]) <= flavor.memory_per_node_gib


@settings(max_examples=150, deadline=None)
@given(requests())
def test_dev_workers_of_a_node_fit_on_it(cluster: Any) -> None:
    assume(cluster.kind == "dev" and cluster.gpu_fraction is None)
    flavor = cluster.flavor
    limits = raycluster(cluster)["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][
        0
    ]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "1"
    assert _cpu(limits["cpu"]) * flavor.gpus_per_node <= flavor.cpu_per_node
    assert _gib(limits["memory"]) * flavor.gpus_per_node <= flavor.memory_per_node_gib


@settings(max_examples=150, deadline=None)
@given(requests())
def test_the_charge_is_the_most_the_raycluster_may_ever_run(cluster: Any) -> None:
    """Issue 10, item 14: what admission charges (``shapes.demand``) is exactly what the
    RayCluster asks for at its largest size, ``maxReplicas`` of every group, so that an
    autoscaling cluster can never grow past what its tenant was charged."""
    obj = raycluster(cluster, kai_enabled=True)
    charged = shapes.demand(
        kind=cluster.kind,
        flavor=shapes.flavor_spec(cluster.flavor),
        workers=cluster.workers,
        min_workers=cluster.min_workers,
        max_workers=cluster.max_workers,
        gpu_fraction=cluster.gpu_fraction,
    )
    gpus = cpu = memory = Decimal(0)
    pods = 0
    for group, template in _pods(obj):
        count = group.get("maxReplicas", 1)
        pods += count
        fraction = template["metadata"].get("annotations", {}).get("gpu-fraction")
        for container in template["spec"]["containers"]:
            limits = container["resources"]["limits"]
            gpus += Decimal(limits.get("nvidia.com/gpu", 0)) * count
            cpu += _cpu(container["resources"]["requests"]["cpu"]) * count
            memory += _gib(container["resources"]["requests"]["memory"]) * count
        if fraction is not None:
            gpus += Decimal(fraction) * count
    sidecar = obj["spec"].get("autoscalerOptions", {}).get("resources", {}).get("requests")
    if sidecar:  # KubeRay adds it to the head pod
        cpu += _cpu(sidecar["cpu"])
        memory += _gib(sidecar["memory"])
        pods += 1
    assert charged.gpus == gpus
    # Quantities are written in millicores and whole MiB, rounded down: the charge may
    # exceed the pods' requests by less than that, never fall short.
    assert Decimal(0) <= charged.cpu - cpu < Decimal(pods) / 1000
    assert Decimal(0) <= charged.memory_gib - memory < Decimal(pods) / 1024
