"""Typed helpers that read settings from the environment and fail loudly.

Every setting of the control plane comes from the environment (STYLE 11). A value
that is present but malformed raises ``ImproperlyConfigured`` naming the variable,
so a typo in a deployment stops the process at start-up instead of surfacing later
as odd behaviour. Secrets may also come from a file named by ``<NAME>_FILE``, which
is how Kubernetes and Docker secrets are usually mounted.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

_UNSET = object()


def _raw(name: str) -> str | None:
    """The variable's value, or the contents of the file named by ``<name>_FILE``."""
    file_var = f"{name}_FILE"
    if file_var in os.environ:
        path = Path(os.environ[file_var])
        try:
            return path.read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{file_var}={path} cannot be read: {exc}") from exc
    return os.environ.get(name)


def env_str(name: str, default: str | None = None, *, allow_empty: bool = False) -> str:
    """A string setting; without a default it is required.

    An empty value counts as unset, unless ``allow_empty``: then a variable that is set
    but empty is a deliberate "" (``KUBECONFIG=`` meaning in-cluster credentials).
    """
    value = _raw(name)
    if allow_empty and value is not None and value.strip() == "":
        return ""
    if value is None or value == "":
        if default is None:
            raise ImproperlyConfigured(f"{name} must be set (or {name}_FILE)")
        return default
    return value


def env_bool(name: str, default: bool) -> bool:
    """A boolean setting: 1/true/yes/on or 0/false/no/off, anything else is an error."""
    value = _raw(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use 1 or 0)")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """An integer setting, optionally bounded below."""
    value = _raw(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from exc
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} must be at least {minimum}")
    return number


def env_float(name: str, default: float) -> float:
    """A floating-point setting."""
    value = _raw(name)
    if value is None or value.strip() == "":
        return default
    try:
        return float(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from exc


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    """A comma-separated list setting; blanks are dropped."""
    value = _raw(name)
    if value is None:
        return list(default or [])
    return [item.strip() for item in value.split(",") if item.strip()]
