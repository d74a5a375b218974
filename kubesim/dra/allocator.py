"""The scheduler's DRA allocator (structured parameters), for one pod on one node.

Devices come from the node's ResourceSlices; a request's candidates are the devices its
DeviceClass's selectors and its own selectors (CEL over ``device.driver``,
``device.attributes[...]`` and ``device.capacity[...]``) accept, that no claim holds and
whose ``consumesCounters`` still fit their pool's shared counters. Simplified: versions are
strings and capacities integers in CEL (no ``semver()``/``quantity()``); a selector that
errors on a device does not match it; no constraints, tolerations, admin access or
consumable capacity.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import lru_cache
from typing import Any

import cel

from kubesim import quantity

SLICES = "resourceslices.resource.k8s.io"
CLASSES = "deviceclasses.resource.k8s.io"
CLAIMS = "resourceclaims.resource.k8s.io"
DeviceId = tuple[str, str, str]  # driver, pool, device


@lru_cache(maxsize=4096)
def compile_selector(expression: str) -> Any:
    """A compiled CEL selector; ValueError with the compiler's report when it does not
    compile or names a variable other than ``device``."""
    program = cel.compile(expression)
    unknown = sorted(v for v in program.variables() if v != "device")
    if unknown:
        found = re.search(rf"\b{re.escape(unknown[0])}\b", expression)
        col = found.start() if found else 0
        raise ValueError(
            f"ERROR: <input>:1:{col + 1}: undeclared reference to '{unknown[0]}' (in container '')"
            f"\n| {expression}\n| {'.' * col}^"
        )
    return program


def compile_error(expression: str) -> str | None:
    """The API server's detail for a selector that does not compile (None: it compiles)."""
    try:
        compile_selector(expression)
    except (ValueError, RuntimeError) as exc:
        text = re.sub(r"^Failed to parse expression '.*?': ", "", str(exc), flags=re.S)
        # cel-go's snippet lines start " | " (cel-rust's "| ").
        return "compilation failed: " + text.replace("\n| ", "\n | ")
    return None


def _value(attr: dict[str, Any]) -> Any:
    for key in ("string", "int", "bool", "version"):
        if key in attr:
            return attr[key]
    return None


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, _, short = name.rpartition("/")
    return (domain or driver), short


def cel_device(driver: str, device: dict[str, Any]) -> dict[str, Any]:
    """The ``device`` variable a selector sees."""
    attrs: dict[str, dict[str, Any]] = {}
    for name, attr in (device.get("attributes") or {}).items():
        domain, short = _qualified(name, driver)
        attrs.setdefault(domain, {})[short] = _value(attr or {})
    caps: dict[str, dict[str, Any]] = {}
    for name, cap in (device.get("capacity") or {}).items():
        domain, short = _qualified(name, driver)
        caps.setdefault(domain, {})[short] = int(quantity.parse((cap or {}).get("value", "0")))
    return {
        "driver": driver,
        "attributes": attrs,
        "capacity": caps,
        "allowMultipleAllocations": bool(device.get("allowMultipleAllocations")),
    }


def matches(selectors: list[dict[str, Any]], env: dict[str, Any]) -> bool:
    """Whether every CEL selector accepts the device."""
    for sel in selectors or []:
        expr = ((sel or {}).get("cel") or {}).get("expression", "")
        try:
            ctx = cel.Context()
            ctx.add_variable("device", env)
            if compile_selector(expr).execute(ctx) is not True:
                return False
        except (ValueError, RuntimeError, TypeError, KeyError):
            return False
    return True


# A slice's devices as selectors see them and its counters, by (name, resourceVersion):
# a slice changes only when its driver republishes it, and converting every device (and
# evaluating every selector on it) again for each pod and node made a claim cost ~100x a
# plain pod's placement at 64 nodes. Bounded: cleared when it grows past _MEMO_LIMIT.
SliceKey = tuple[str, str]
Parsed = tuple[
    list[tuple[DeviceId, dict[str, Any], dict[str, Any]]],
    dict[tuple[str, str, str], dict[str, int]],
]
_PARSED: dict[SliceKey, Parsed] = {}
_MATCHED: dict[tuple[SliceKey, str, str], bool] = {}
_MEMO_LIMIT = 200_000


def _parsed(sl: dict[str, Any]) -> tuple[SliceKey, Parsed]:
    meta = sl.get("metadata") or {}
    key = (str(meta.get("name", "")), str(meta.get("resourceVersion", "")))
    found = _PARSED.get(key)
    if found is None or not key[1]:
        spec = sl.get("spec") or {}
        driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
        counters = {
            (driver, pool, cs["name"]): {
                k: int(quantity.parse(v.get("value", "0"))) for k, v in cs["counters"].items()
            }
            for cs in spec.get("sharedCounters") or []
        }
        devices = [
            ((driver, pool, dev["name"]), dev, cel_device(driver, dev))
            for dev in spec.get("devices") or []
        ]
        if len(_PARSED) > _MEMO_LIMIT // 100:
            _PARSED.clear()
        found = _PARSED[key] = (devices, counters)
    return key, found


class Inventory:
    """The devices of one node and what the cluster's claims already hold."""

    def __init__(self, store: Any, node: str) -> None:
        self.store = store
        self.devices: list[tuple[DeviceId, dict[str, Any], dict[str, Any]]] = []
        self.slice_of: dict[DeviceId, SliceKey] = {}
        self.counters: dict[tuple[str, str, str], Counter[str]] = {}
        for sl in store.iter(SLICES):
            spec = sl.get("spec") or {}
            if spec.get("nodeName") != node and not spec.get("allNodes"):
                continue
            key, (devices, counters) = _parsed(sl)
            for name, amounts in counters.items():
                self.counters[name] = Counter(amounts)
            self.devices.extend(devices)
            self.slice_of.update((did, key) for did, _, _ in devices)
        self.by_id = {d[0]: d[1] for d in self.devices}
        self.used: set[DeviceId] = set()
        for claim in store.iter(CLAIMS):
            for res in _results(claim):
                did = (res.get("driver", ""), res.get("pool", ""), res.get("device", ""))
                if did in self.by_id:
                    self._take(did)

    def _consumption(self, did: DeviceId) -> list[tuple[tuple[str, str, str], Counter[str]]]:
        out = []
        for cc in self.by_id[did].get("consumesCounters") or []:
            amounts = Counter(
                {k: int(quantity.parse(v.get("value", "0"))) for k, v in cc["counters"].items()}
            )
            out.append(((did[0], did[1], cc["counterSet"]), amounts))
        return out

    def _fits(self, did: DeviceId) -> bool:
        for key, amounts in self._consumption(did):
            left = self.counters.get(key)
            if left is None or any(left[k] < v for k, v in amounts.items()):
                return False
        return True

    def _take(self, did: DeviceId) -> None:
        self.used.add(did)
        for key, amounts in self._consumption(did):
            if key in self.counters:
                self.counters[key].subtract(amounts)

    def free(self, did: DeviceId) -> bool:
        """Whether the device may be allocated now."""
        return did not in self.used and self._fits(did)

    def allocate(self, claims: list[dict[str, Any]]) -> list[list[dict[str, Any]]] | None:
        """Device results for each claim (in order), taken from this inventory; None when
        any request cannot be met on this node (all-or-nothing, as kube-scheduler)."""
        out = []
        for claim in claims:
            results = self._allocate_claim(claim)
            if results is None:
                return None
            out.append(results)
        return out

    def _allocate_claim(self, claim: dict[str, Any]) -> list[dict[str, Any]] | None:
        results: list[dict[str, Any]] = []
        for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            options = (
                [(f"{req['name']}/{s['name']}", s) for s in req["firstAvailable"]]
                if req.get("firstAvailable")
                else [(req["name"], req.get("exactly") or {})]
            )
            for name, sub in options:
                picked = self._pick(sub)
                if picked is not None:
                    for did in picked:
                        self._take(did)
                        results.append(
                            {"request": name, "driver": did[0], "pool": did[1], "device": did[2]}
                        )
                    break
            else:
                return None
        return results

    def _pick(self, req: dict[str, Any]) -> list[DeviceId] | None:
        cls = self.store.get(CLASSES, "", req.get("deviceClassName", ""))
        if cls is None:
            return None
        selectors = ((cls.get("spec") or {}).get("selectors") or []) + (req.get("selectors") or [])
        wanted = [did for did, _, env in self.devices if self._matches(selectors, did, env)]
        if req.get("allocationMode") == "All":
            ok = bool(wanted) and all(self.free(d) for d in wanted)
            return wanted if ok else None
        picked: list[DeviceId] = []
        for did in wanted:
            if len(picked) == int(req.get("count") or 1):
                break
            if self.free(did) and did not in picked:
                picked.append(did)
                self._take(did)  # later picks see this one's counters gone
        for did in picked:
            self._untake(did)
        return picked if len(picked) == int(req.get("count") or 1) else None

    def _matches(self, selectors: list[dict[str, Any]], did: DeviceId, env: dict[str, Any]) -> bool:
        """:func:`matches`, remembered per slice version, device and selectors."""
        where = self.slice_of.get(did)
        if where is None or not where[1]:
            return matches(selectors, env)
        key = (where, did[2], json.dumps(selectors, sort_keys=True))
        found = _MATCHED.get(key)
        if found is None:
            if len(_MATCHED) > _MEMO_LIMIT:
                _MATCHED.clear()
            found = _MATCHED[key] = matches(selectors, env)
        return found

    def _untake(self, did: DeviceId) -> None:
        self.used.discard(did)
        for key, amounts in self._consumption(did):
            if key in self.counters:
                self.counters[key].update(amounts)

    def available_counters(self) -> dict[tuple[str, str, str], dict[str, int]]:
        """What is left of each shared counter set (kubesim's view, for tests and docs)."""
        return {k: dict(v) for k, v in self.counters.items()}


def _results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return list((alloc.get("devices") or {}).get("results") or [])
