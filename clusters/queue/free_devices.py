"""What a DRA flavor can still place, from ResourceSlices and ResourceClaims (pure).

A DRA flavor's GPUs are devices a DRA driver publishes (``resource.k8s.io/v1``): a
device is free when no allocated claim holds it and what it consumes of its pool's
shared counters is still there (a MIG partition in use makes its parent GPU
unallocatable, a GPU allocated whole its partitions). Only nodes the DRA driver manages
count (a node without the device plugin's ``nvidia.com/gpu`` allocatable), of the
flavor's product; a device is the flavor's when its DeviceClass's selectors and the
flavor's own (a MIG flavor's profile) accept it, as the scheduler decides. The CEL is
evaluated once per version of a slice, not every pass.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any, Protocol

from clusters.kube.quantities import GPU, GPU_PRODUCT_LABEL

DeviceId = tuple[str, str, str]  # driver, pool, device
CounterKey = tuple[str, str, str]  # driver, pool, counter set
# The attribute domain of NVIDIA's DRA driver (device.attributes["gpu.nvidia.com"]).
NVIDIA_DRIVER = "gpu.nvidia.com"
# Matches kept of this many slice versions, then forgotten all at once.
_MATCH_CACHE_SIZE = 20_000

_SUFFIX: dict[str, Decimal | int] = {
    "": 1,
    "m": Decimal("0.001"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
}
_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")


class DraFlavor(Protocol):
    """What this module reads of a flavor (tenants.models.GpuFlavor answers it)."""

    name: str
    gpu_product: str

    @property
    def uses_dra(self) -> bool: ...

    @property
    def dra_device_class(self) -> str: ...

    @property
    def dra_selectors(self) -> list[str]: ...


@dataclass(frozen=True)
class Free:
    """Free GPUs and wholly free nodes of one GPU product (or of one DRA flavor: its
    devices), and its ready nodes (``seen``: what the cluster has of the nodes the
    catalogue lists)."""

    gpus: int
    nodes: int
    seen: int = 0


def node_ready(node: dict[str, Any]) -> bool:
    """Whether a node is Ready and schedulable."""
    conditions = (node.get("status") or {}).get("conditions") or []
    unschedulable = (node.get("spec") or {}).get("unschedulable", False)
    return not unschedulable and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


def dra_managed(node: dict[str, Any]) -> bool:
    """Whether a GPU node's devices are a DRA driver's: it has a GPU product label and
    does not advertise the device plugin's ``nvidia.com/gpu`` (NVIDIA's charts deploy one
    of the two per node). Extended-resource flavors never count such a node."""
    meta = node.get("metadata") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return bool((meta.get("labels") or {}).get(GPU_PRODUCT_LABEL)) and GPU not in allocatable


def quantity(value: Any) -> Decimal:
    """A Kubernetes quantity (``132``, ``81559Mi``) as a number (0 when unreadable)."""
    found = _QUANTITY.match(str(value or "0").strip())
    if found is None or found.group(2) not in _SUFFIX:
        return Decimal(0)
    try:
        return Decimal(found.group(1)) * _SUFFIX[found.group(2)]
    except ArithmeticError:
        return Decimal(0)


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, _, short = name.rpartition("/")
    return (domain or driver), short


def _value(attr: dict[str, Any]) -> Any:
    for key in ("string", "int", "bool", "version"):
        if key in attr:
            return attr[key]
    return None


def attribute(device: dict[str, Any], driver: str, name: str, domain: str = NVIDIA_DRIVER) -> Any:
    """One attribute of a device (``type``, ``profile``, ``uuid``, ``parentUUID``)."""
    for key, attr in (device.get("attributes") or {}).items():
        if _qualified(key, driver) == (domain, name):
            return _value(attr or {})
    return None


def cel_device(driver: str, device: dict[str, Any]) -> dict[str, Any]:
    """The ``device`` variable a CEL selector sees for one device."""
    attrs: dict[str, dict[str, Any]] = defaultdict(dict)
    for key, attr in (device.get("attributes") or {}).items():
        domain, short = _qualified(key, driver)
        attrs[domain][short] = _value(attr or {})
    caps: dict[str, dict[str, Any]] = defaultdict(dict)
    for key, cap in (device.get("capacity") or {}).items():
        domain, short = _qualified(key, driver)
        caps[domain][short] = int(quantity((cap or {}).get("value")))
    return {
        "driver": driver,
        "attributes": dict(attrs),
        "capacity": dict(caps),
        "allowMultipleAllocations": bool(device.get("allowMultipleAllocations")),
    }


@lru_cache(maxsize=256)
def _program(expression: str) -> Any:
    import cel  # loaded on first use, as tenants.cel does

    return cel.compile(expression)


def accepts(expressions: Iterable[str], env: dict[str, Any]) -> bool:
    """Whether every CEL expression is true of the device (one that errors: no match,
    as the scheduler treats it)."""
    import cel

    for expression in expressions:
        try:
            context = cel.Context()
            context.add_variable("device", env)
            if _program(expression).execute(context) is not True:
                return False
        except (ValueError, RuntimeError, TypeError, KeyError):
            return False
    return True


_MATCHES: dict[tuple[str, str, tuple[str, ...]], frozenset[str]] = {}


def _matching(slice_: dict[str, Any], selectors: tuple[str, ...]) -> frozenset[str]:
    """Names of the slice's devices every selector accepts, remembered per slice version."""
    meta = slice_.get("metadata") or {}
    key = (str(meta.get("uid") or meta.get("name")), str(meta.get("resourceVersion")), selectors)
    found = _MATCHES.get(key)
    if found is None or not key[1]:
        spec = slice_.get("spec") or {}
        driver = spec.get("driver", "")
        found = frozenset(
            d["name"]
            for d in spec.get("devices") or []
            if accepts(selectors, cel_device(driver, d))
        )
        if len(_MATCHES) >= _MATCH_CACHE_SIZE:
            _MATCHES.clear()
        _MATCHES[key] = found
    return found


def class_selectors(classes: list[dict[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Each DeviceClass's CEL selectors, by name."""
    return {
        c["metadata"]["name"]: tuple(
            ((s or {}).get("cel") or {}).get("expression", "")
            for s in (c.get("spec") or {}).get("selectors") or []
        )
        for c in classes
    }


@dataclass(frozen=True)
class Device:
    """One published device on a node, whether a claim holds it and whether it can be
    allocated now (not held, its counters still there)."""

    node: str
    name: str
    kind: str  # the driver's type: gpu or mig
    profile: str
    uuid: str
    parent: str  # a partition's parent GPU's UUID
    held: bool
    free: bool


def _amounts(counters: dict[str, Any]) -> Counter[str]:
    return Counter({k: int(quantity((v or {}).get("value"))) for k, v in counters.items()})


def _held(claims: list[dict[str, Any]]) -> set[DeviceId]:
    """The devices allocated claims hold."""
    held: set[DeviceId] = set()
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            held.add((result.get("driver", ""), result.get("pool", ""), result.get("device", "")))
    return held


def _consumes(did: DeviceId, device: dict[str, Any]) -> list[tuple[CounterKey, Counter[str]]]:
    """What a device takes of its pool's shared counter sets when allocated."""
    return [
        ((did[0], did[1], c["counterSet"]), _amounts(c.get("counters") or {}))
        for c in device.get("consumesCounters") or []
    ]


def devices(slices: list[dict[str, Any]], claims: list[dict[str, Any]]) -> list[Device]:
    """Every device of the node-local slices, with what allocated claims hold."""
    held = _held(claims)
    left: dict[CounterKey, Counter[str]] = {}
    published: list[tuple[DeviceId, str, dict[str, Any]]] = []
    for slice_ in slices:
        spec = slice_.get("spec") or {}
        node = spec.get("nodeName")
        if not node:
            continue
        driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
        for counter_set in spec.get("sharedCounters") or []:
            left[(driver, pool, counter_set["name"])] = _amounts(counter_set.get("counters") or {})
        for device in spec.get("devices") or []:
            published.append(((driver, pool, device["name"]), node, device))

    for did, _, device in published:
        if did in held:
            for key, amounts in _consumes(did, device):
                if key in left:
                    left[key].subtract(amounts)
    out = []
    for did, node, device in published:
        fits = all(
            key in left and all(left[key][k] >= v for k, v in amounts.items())
            for key, amounts in _consumes(did, device)
        )
        out.append(
            Device(
                node=node,
                name=did[2],
                kind=str(attribute(device, did[0], "type") or ""),
                profile=str(attribute(device, did[0], "profile") or ""),
                uuid=str(attribute(device, did[0], "uuid") or ""),
                parent=str(attribute(device, did[0], "parentUUID") or ""),
                held=did in held,
                free=did not in held and fits,
            )
        )
    return out


def free_by_flavor(
    flavors: Iterable[DraFlavor],
    nodes: list[dict[str, Any]],
    slices: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    classes: list[dict[str, Any]],
) -> dict[str, Free]:
    """Free devices, wholly free nodes and ready DRA nodes per DRA flavor, by name."""
    dra = [f for f in flavors if f.uses_dra]
    if not dra:
        return {}
    product_of = {
        n["metadata"]["name"]: n["metadata"]["labels"][GPU_PRODUCT_LABEL]
        for n in nodes
        if dra_managed(n) and node_ready(n)
    }
    state = {(d.node, d.name): d.free for d in devices(slices, claims)}
    selectors_of = class_selectors(classes)
    out = {}
    for flavor in dra:
        cls = selectors_of.get(flavor.dra_device_class)
        on = {n for n, p in product_of.items() if p == flavor.gpu_product}
        mine: dict[str, list[bool]] = {n: [] for n in on}
        if cls is not None:  # a class the cluster lacks: no device is the flavor's
            wanted = (*cls, *flavor.dra_selectors)
            for slice_ in slices:
                node = str((slice_.get("spec") or {}).get("nodeName") or "")
                if node in on:
                    mine[node] += [state[(node, d)] for d in sorted(_matching(slice_, wanted))]
        out[flavor.name] = Free(
            gpus=sum(sum(free) for free in mine.values()),
            nodes=sum(1 for free in mine.values() if free and all(free)),
            seen=len(on),
        )
    return out


@dataclass(frozen=True)
class GpuUse:
    """One whole GPU of a DRA node: held whole, or how many of its partitions of each
    profile are in use (``partitions``: profile, in use, of)."""

    node: str
    device: str
    held: bool
    free: bool
    partitions: tuple[tuple[str, int, int], ...]

    @property
    def summary(self) -> str:
        """What the capacity page says of it."""
        if self.held:
            return "in use whole"
        if self.partitions:
            return ", ".join(f"{used} of {n} {p} in use" for p, used, n in self.partitions)
        return "free" if self.free else "unavailable"


def gpu_use(slices: list[dict[str, Any]], claims: list[dict[str, Any]]) -> list[GpuUse]:
    """Every whole GPU of the published slices with its partitions in use, by node."""
    found = devices(slices, claims)
    parts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    used: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for d in found:
        if d.parent:
            parts[(d.node, d.parent)][d.profile] += 1
            used[(d.node, d.parent)][d.profile] += d.held
    out = []
    for d in found:
        if d.kind != "gpu":
            continue
        of = parts[(d.node, d.uuid)]
        out.append(
            GpuUse(
                node=d.node,
                device=d.name,
                held=d.held,
                free=d.free,
                partitions=tuple((p, used[(d.node, d.uuid)][p], n) for p, n in sorted(of.items())),
            )
        )
    return sorted(out, key=lambda g: (g.node, _gpu_index(g.device)))


def _gpu_index(name: str) -> tuple[int, str]:
    digits = re.sub(r"\D", "", name)
    return (int(digits) if digits else 0, name)
