"""The two ways a Kubernetes call fails, each with a message a person can read:
:class:`TransientKubeError` is worth retrying (timeouts, connection errors, 429, 5xx,
409 conflicts), :class:`PermanentKubeError` is not (400, 403, unexpected 404, 422)."""

from __future__ import annotations

import json
from typing import Any

import urllib3


class KubeError(Exception):
    """A failed Kubernetes call, with a readable message and the HTTP status (0: none)."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class TransientKubeError(KubeError):
    """Worth retrying; ``retry_after`` is the server's requested wait, in seconds."""

    def __init__(self, message: str, *, status: int = 0, retry_after: float | None = None):
        super().__init__(message, status=status)
        self.retry_after = retry_after


class PermanentKubeError(KubeError):
    """Retrying will not help: the request itself is wrong or refused."""


class NamespaceMissing(PermanentKubeError):
    """A 404 whose missing object is a namespace (``namespaces "x" not found``): a
    write into a namespace that does not exist. Retrying the same write will not help;
    creating the namespace first will (:func:`clusters.kube.bundles.apply_into`)."""


class WatchExpired(PermanentKubeError):
    """A watch from a resourceVersion the API server no longer keeps (410 Gone): the
    watcher must list again and watch from the new list's version."""


def watch_error(status: dict[str, Any], *, what: str) -> KubeError:
    """The exception for a watch's ``ERROR`` event (its object is a ``Status``)."""
    code = int(status.get("code") or 0)
    message = f"{what}: {code} {status.get('message') or status.get('reason') or 'error'}"
    if code == 410:
        return WatchExpired(message, status=code)
    if code == 429 or code >= 500:
        return TransientKubeError(message, status=code)
    return PermanentKubeError(message, status=code)


def transport_error(exc: Exception, *, what: str) -> KubeError:
    """A failure below HTTP (a connection refused or broken, a timeout) is transient;
    anything else unexpected is permanent."""
    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError | TimeoutError):
        return TransientKubeError(f"{what}: cannot reach the Kubernetes API ({exc})")
    return PermanentKubeError(f"{what}: {type(exc).__name__}: {exc}")


# What an API server says when something is created in a namespace being deleted: it
# is gone soon, and can be created again then.
TERMINATING = "because it is being terminated"


def status_body(exc: Any) -> dict[str, Any]:
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        body = {}
    return body if isinstance(body, dict) else {}


def status_message(exc: Any) -> str:
    message = status_body(exc).get("message")
    return str(message or exc.reason or "no message")


def retry_after_seconds(value: Any) -> float | None:
    """Seconds a ``Retry-After`` header asks for; ``None`` when absent or unreadable."""
    try:
        return max(float(value), 0.0) if value is not None else None
    except (TypeError, ValueError):
        return None


def retry_after(exc: Any) -> float | None:
    headers = exc.headers or {}
    return retry_after_seconds(headers.get("Retry-After") or headers.get("retry-after"))
