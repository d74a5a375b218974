"""What a simulated Ray job asks of its cluster: its driver's entrypoint resources (a
RayJob's ``entrypointNumCpus``/``entrypointNumGpus``/``entrypointResources``, the job API's
``entrypoint_num_cpus``/``_num_gpus``/``_memory``/``_resources``) and its tasks' bundles,
which only a simulator knob says: ``kubesim.io/job-demand`` (RayJob annotation, job API
metadata) and ``kubesim.io/ray-driver-demand`` (RayCluster, for its interactive driver).
A knob is JSON: a list of bundles, each a map of Ray resource (``CPU``, ``GPU``, ``memory``
in bytes or a quantity such as ``"4Gi"``, custom names) to an amount, with an optional
``"count"`` repeating it: ``[{"GPU": 1, "CPU": 4, "count": 8}]``. A value that does not
parse is no demand.
"""

from __future__ import annotations

import json
from typing import Any

from kubesim import quantity

ANN_JOB_DEMAND = "kubesim.io/job-demand"
ANN_DRIVER_DEMAND = "kubesim.io/ray-driver-demand"
# More bundles than any simulated cluster could hold; keeps a typo from costing minutes.
MAX_BUNDLES = 10_000
Bundle = dict[str, float]


def _amount(value: Any) -> float | None:
    try:
        out = float(quantity.parse(value))
    except (quantity.QuantityError, ValueError):
        return None
    return out if out >= 0 else None


def bundle(raw: Any) -> Bundle | None:
    """One bundle from a map of resource to amount (zero amounts dropped); None if it is
    not one."""
    if not isinstance(raw, dict):
        return None
    out: Bundle = {}
    for key, value in raw.items():
        amount = _amount(value)
        if not isinstance(key, str) or amount is None:
            return None
        if amount > 0:
            out[key] = amount
    return out


def parse_bundles(text: Any) -> list[Bundle]:
    """The bundles of a demand knob (see the module docstring); [] when it does not parse."""
    if not text:
        return []
    try:
        raw = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return []
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        return []
    out: list[Bundle] = []
    for item in raw:
        if not isinstance(item, dict):
            return []
        item = dict(item)
        count = item.pop("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            return []
        one = bundle(item)
        if one is None:
            return []
        if one:
            out.extend(dict(one) for _ in range(min(count, MAX_BUNDLES - len(out))))
    return out


def entrypoint_bundle(
    num_cpus: Any = None, num_gpus: Any = None, memory: Any = None, resources: Any = None
) -> Bundle:
    """The driver's bundle from its entrypoint resources (``resources`` a map or its JSON
    text, as a RayJob's ``entrypointResources`` carries it); {} when it asks nothing."""
    if isinstance(resources, str):
        try:
            resources = json.loads(resources) if resources.strip() else {}
        except ValueError:
            resources = {}
    found = bundle(resources if isinstance(resources, dict) else {}) or {}
    for key, value in (("CPU", num_cpus), ("GPU", num_gpus), ("memory", memory)):
        amount = _amount(value) if value is not None else None
        if amount:
            found[key] = amount
    return found
