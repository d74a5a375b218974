"""Environment variables a request may set on its Ray containers: the one set of rules.

Pure: the services call :func:`validate_env` on a request's ``env`` and a job's
``runtime_env.env_vars`` asks :func:`refusal`, so the refused names are listed once,
each with the reason a user reads (docs/containers.md lists the same). A name is
refused when setting it could defeat the GPU rules (which devices a process sees, which
driver libraries it loads), break Ray or KubeRay, point the container runtime elsewhere,
or give pip another index or options (``PIP_*``, as for ``runtime_env.pip``).
"""

from __future__ import annotations

import re
from typing import Any

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_NAME = 128
MAX_VARIABLES = 64
MAX_VALUE_BYTES = 4 * 1024
MAX_TOTAL_BYTES = 32 * 1024

GPU_REASON = (
    "decides which GPUs a process sees; the platform sets it from the GPUs the pod was "
    "given, so it may not be overridden"
)
ACCELERATOR_REASON = (
    "is what Ray reads to count another vendor's accelerators; set, it would let Ray "
    "schedule work on devices the pod was not given"
)
LOADER_REASON = (
    "changes which libraries every process loads, and could replace the GPU driver "
    "libraries the NVIDIA runtime put into the pod"
)
RAY_REASON = (
    "is one of Ray's or KubeRay's own settings; gangway and KubeRay set them to start "
    "and find the cluster"
)
KUBE_REASON = "is set by Kubernetes or KubeRay for the pod and must stay as they set it"
PIP_REASON = (
    "configures pip (its package index, trusted hosts, extra options) where Ray installs "
    "a job's runtime_env.pip; the platform chooses the package index"
)
RUNTIME_REASON = (
    "configures the container runtime inside the pod; gangway points it at the pod's "
    "own GPUs when containers are enabled"
)

NOTEBOOK_REASON = "tells JupyterLab on the head where the product's proxy serves it"

# Prefixes (upper case) and the reason a name starting with one is refused.
REFUSED_PREFIXES: tuple[tuple[str, str], ...] = (
    ("NVIDIA_", GPU_REASON),
    ("CUDA_", GPU_REASON),
    ("LD_", LOADER_REASON),
    ("RAY_", RAY_REASON),
    ("KUBERAY_", RAY_REASON),
    ("KUBERNETES_", KUBE_REASON),
    ("CONTAINERS_", RUNTIME_REASON),
    ("PIP_", PIP_REASON),
)
PREEMPTION_REASON = (
    "is set by gangway: the preemption notice and the checkpoint to resume from "
    "(docs/preemption.md)"
)
# Exact names (upper case) and why.
REFUSED_NAMES: dict[str, str] = {
    "HIP_VISIBLE_DEVICES": ACCELERATOR_REASON,
    "ROCR_VISIBLE_DEVICES": ACCELERATOR_REASON,
    "GPU_DEVICE_ORDINAL": ACCELERATOR_REASON,
    "NEURON_RT_VISIBLE_CORES": ACCELERATOR_REASON,
    "TPU_VISIBLE_CHIPS": ACCELERATOR_REASON,
    "ONEAPI_DEVICE_SELECTOR": ACCELERATOR_REASON,
    "HABANA_VISIBLE_MODULES": ACCELERATOR_REASON,
    "PATH": "is how the pod finds ray, python and the container runtime",
    "HOSTNAME": KUBE_REASON,
    "MY_POD_IP": KUBE_REASON,
    "MY_POD_NAME": KUBE_REASON,
    "FQ_RAY_IP": KUBE_REASON,
    "REDIS_PASSWORD": RAY_REASON,
    "GANGWAY_NOTEBOOK_BASE_URL": NOTEBOOK_REASON,
    "GANGWAY_NOTEBOOK_PORT": NOTEBOOK_REASON,
    "GANGWAY_PREEMPTION_URL": PREEMPTION_REASON,
    "GANGWAY_RESUME_FROM": PREEMPTION_REASON,
    "GANGWAY_PODINFO_ANNOTATIONS": PREEMPTION_REASON,
}
# Ray settings that only change how output reads: harmless, and asked for.
ALLOWED_RAY: frozenset[str] = frozenset({"RAY_DEDUP_LOGS", "RAY_COLOR_PREFIX"})


def refusal(name: str) -> str | None:
    """Why ``name`` may not be set (a sentence naming it), or ``None`` if it may.

    Names are compared in upper case: a process environment is case sensitive, but a
    lower-case ``cuda_visible_devices`` is more likely a mistake than a new variable,
    and refusing it costs nothing."""
    upper = name.upper()
    if upper in ALLOWED_RAY:
        return None
    reason = REFUSED_NAMES.get(upper)
    if reason is None:
        reason = next((why for prefix, why in REFUSED_PREFIXES if upper.startswith(prefix)), None)
    return f"{name} {reason}." if reason else None


def validate_env(value: Any) -> tuple[dict[str, str], list[str]]:
    """``value`` as the sorted ``{name: value}`` written into the containers, and every
    fault at once (each naming its variable); no faults means it may be used.

    An object of at most :data:`MAX_VARIABLES` string values; names match
    :data:`NAME_RE` and are not refused (:func:`refusal`); each value at most
    :data:`MAX_VALUE_BYTES` bytes (UTF-8), all names and values together at most
    :data:`MAX_TOTAL_BYTES`, and no NUL characters (a process environment cannot hold
    them)."""
    if value in (None, ""):
        return {}, []
    if not isinstance(value, dict):
        return {}, ['Give an object of names to string values, e.g. {"WANDB_MODE": "offline"}.']
    faults: list[str] = []
    if len(value) > MAX_VARIABLES:
        faults.append(f"{len(value)} variables: at most {MAX_VARIABLES}.")
    total = 0
    for name, val in value.items():
        fault, size = _variable_fault(str(name), val)
        total += size
        if fault:
            faults.append(fault)
    if total > MAX_TOTAL_BYTES:
        faults.append(
            f"The variables are {total:,} bytes in all; at most {MAX_TOTAL_BYTES:,}. Put "
            "large settings in a file your code reads."
        )
    if faults:
        return {}, faults
    return {str(k): value[k] for k in sorted(value, key=str)}, []


def _variable_fault(name: str, val: Any) -> tuple[str, int]:
    """What is wrong with one variable (``""``: nothing) and its size in bytes."""
    if not NAME_RE.match(name) or len(name) > MAX_NAME:
        return (
            f"{name!r} is not a valid variable name: letters, digits and _, not starting "
            f"with a digit, at most {MAX_NAME} characters.",
            0,
        )
    why = refusal(name)
    if why:
        return why, 0
    if not isinstance(val, str):
        return f"{name}: the value must be a string (quote numbers).", 0
    try:
        size = len(val.encode())
    except UnicodeEncodeError:  # a lone surrogate ("\ud800") from a JSON body
        return f"{name}: the value is not valid Unicode text.", 0
    if "\x00" in val:
        return f"{name}: the value may not contain NUL characters.", size
    if size > MAX_VALUE_BYTES:
        return f"{name}: the value is {size:,} bytes; at most {MAX_VALUE_BYTES:,}.", size
    return "", len(name) + size
