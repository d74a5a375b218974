"""Checking a job's ``runtime_env``: what Ray will install and set before the driver runs.

Of Ray's many keys a shared GPU platform supports safely: code from a URI
(``working_dir``, ``py_modules``), ``pip`` packages (one requirement each:
:mod:`clusters.kinds.rayjob.pip_requirements`) and ``env_vars``, never one that
:mod:`clusters.domain.environment` refuses (which GPUs a process sees, Ray's own
settings). Every fault is reported at once, under the key it concerns.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import urlparse

from clusters.domain.environment import NAME_RE as ENV_NAME_RE
from clusters.domain.environment import refusal
from clusters.kinds.rayjob.pip_requirements import requirement_fault

MAX_BYTES = 16 * 1024  # the whole runtime_env as JSON; it is written into the RayJob
MAX_PIP = 100
MAX_ENV = 100
MAX_VALUE = 4096
ALLOWED_KEYS = ("working_dir", "py_modules", "pip", "env_vars")
# Remote URIs Ray can fetch a working_dir or module from on the cluster (the submitter
# runs in the cluster: a path on the engineer's laptop means nothing there): Ray's own
# remote protocols (https only, never plain http; azure for Azure Blob Storage), and gcs
# for a package already uploaded to the host cluster's GCS. Any other scheme fails the
# job on the cluster with Ray's "Invalid protocol for runtime_env URI".
URI_SCHEMES = ("https", "s3", "gs", "azure", "gcs")
# Ray's dict form of ``pip``: the packages and whether to run ``pip check``. Its other
# keys (pip_install_options, pip_version) hand pip options or a pip of the job's choice.
PIP_DICT_KEYS = ("packages", "pip_check")
MAX_PIP_FAULTS = 10

Check = Callable[[Any], tuple[Any, list[str]]]


def validate_runtime_env(
    value: Any, *, allow_pip_direct_urls: bool = False
) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The runtime_env as it will be written, and the faults by key (``runtime_env`` for
    the whole, ``runtime_env.<key>`` for one part); no faults means it may be used.
    ``allow_pip_direct_urls`` is the tenant's policy on ``name @ https://...`` packages."""
    if value in (None, ""):
        return {}, {}
    if not isinstance(value, dict):
        return {}, {"runtime_env": ['Give an object, e.g. {"pip": ["torch==2.4.0"]}.']}
    errors: dict[str, list[str]] = {}
    size = len(json.dumps(value, separators=(",", ":")).encode())
    if size > MAX_BYTES:
        errors["runtime_env"] = [
            f"It is {size:,} bytes as JSON; at most {MAX_BYTES:,} are accepted. Put large "
            "requirement lists in a requirements file inside working_dir."
        ]
        return {}, errors
    unknown = sorted(set(value) - set(ALLOWED_KEYS))
    if unknown:
        errors["runtime_env"] = [
            f"Unknown key{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}. "
            f"Accepted: {', '.join(ALLOWED_KEYS)}."
        ]
    clean: dict[str, Any] = {}
    checks: dict[str, Check] = {
        **_CHECKS,
        "pip": partial(_pip, allow_direct_urls=allow_pip_direct_urls),
    }
    for key, check in checks.items():
        if key in value:
            checked, faults = check(value[key])
            if faults:
                errors[f"runtime_env.{key}"] = faults
            else:
                clean[key] = checked
    return clean, errors


def _working_dir(value: Any) -> tuple[Any, list[str]]:
    fault = _uri_fault(value)
    return value, [fault] if fault else []


def _py_modules(value: Any) -> tuple[Any, list[str]]:
    if not isinstance(value, list) or not value:
        return None, ["Give a list of URIs."]
    return list(value), [f"{m!r}: {f}" for m in value if (f := _uri_fault(m))]


def _uri_fault(uri: Any) -> str:
    if not isinstance(uri, str) or not uri.strip():
        return "Give a URI, e.g. s3://bucket/code.zip or https://host/code.zip."
    if len(uri) > MAX_VALUE:
        return f"At most {MAX_VALUE} characters."
    parsed = urlparse(uri)
    if parsed.scheme not in URI_SCHEMES or not parsed.netloc:
        return (
            f"{uri!r} is not a remote URI the Ray cluster can fetch; use one of "
            f"{', '.join(s + '://' for s in URI_SCHEMES)} (a local path exists only on "
            "your machine)."
        )
    if parsed.scheme == "https" and not parsed.path.endswith(".zip"):
        return "An https URI must point to a .zip archive, as Ray requires."
    return ""


def _pip(value: Any, *, allow_direct_urls: bool) -> tuple[Any, list[str]]:
    """The pip packages as a list, or Ray's dict form limited to :data:`PIP_DICT_KEYS`;
    each package one requirement (:func:`requirement_fault`)."""
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(PIP_DICT_KEYS))
        if unknown:
            return None, [
                f"Unknown key{'s' if len(unknown) > 1 else ''} in pip: {', '.join(unknown)}. "
                f"Accepted: {', '.join(PIP_DICT_KEYS)} (pip options and the pip version are "
                "the platform's)."
            ]
        if "pip_check" in value and not isinstance(value["pip_check"], bool):
            return None, ["pip_check must be true or false."]
        packages, faults = _pip_packages(value.get("packages"), allow_direct_urls)
        return ({**value, "packages": packages} if not faults else None), faults
    return _pip_packages(value, allow_direct_urls)


def _pip_packages(packages: Any, allow_direct_urls: bool) -> tuple[Any, list[str]]:
    if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
        return None, ['Give a list of requirement strings, e.g. ["torch==2.4.0", "datasets"].']
    if len(packages) > MAX_PIP:
        return None, [f"At most {MAX_PIP} packages; put more in a requirements file."]
    faults = [
        f"{_shown(p)}: {why}."
        for p in packages
        if (why := requirement_fault(p, allow_direct_urls=allow_direct_urls))
    ]
    if len(faults) > MAX_PIP_FAULTS:
        faults = [*faults[:MAX_PIP_FAULTS], f"... and {len(faults) - MAX_PIP_FAULTS} more."]
    return ([p.strip() for p in packages] if not faults else None), faults


def _shown(entry: str) -> str:
    # repr shows line breaks and control characters as escapes; a long entry is cut.
    return repr(entry if len(entry) <= 80 else entry[:77] + "...")


def _env_vars(value: Any) -> tuple[Any, list[str]]:
    if not isinstance(value, dict):
        return {}, ['Give an object of names to string values, e.g. {"WANDB_MODE": "offline"}.']
    if len(value) > MAX_ENV:
        return {}, [f"At most {MAX_ENV} variables."]
    faults = []
    for name, val in value.items():
        if not ENV_NAME_RE.match(str(name)):
            faults.append(f"{name!r} is not a valid variable name (letters, digits, _).")
        elif why := refusal(str(name)):
            faults.append(why)
        elif not isinstance(val, str):
            faults.append(f"{name}: the value must be a string (quote numbers).")
        elif len(val) > MAX_VALUE:
            faults.append(f"{name}: at most {MAX_VALUE} characters.")
    return ({str(k): str(v) for k, v in value.items()} if not faults else {}), faults


_CHECKS: dict[str, Check] = {
    "working_dir": _working_dir,
    "py_modules": _py_modules,
    "env_vars": _env_vars,
}
