"""API errors and the ``Status`` bodies Kubernetes answers them with."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error answered as a ``metav1.Status`` with an HTTP code and a reason."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        """The Status body."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def resource_ref(kind_plural: str, group: str) -> str:
    """How Kubernetes names a resource in messages: ``pods`` or ``rayclusters.ray.io``."""
    return f"{kind_plural}.{group}" if group else kind_plural


def _details(name: str, group: str, plural: str) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name, "kind": plural}
    if group:
        d["group"] = group
    return d


def not_found(plural: str, group: str, name: str) -> ApiError:
    """404 NotFound: ``pods "x" not found``."""
    return ApiError(
        404,
        "NotFound",
        f'{resource_ref(plural, group)} "{name}" not found',
        _details(name, group, plural),
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    """409 AlreadyExists."""
    return ApiError(
        409,
        "AlreadyExists",
        f'{resource_ref(plural, group)} "{name}" already exists',
        _details(name, group, plural),
    )


def conflict(plural: str, group: str, name: str) -> ApiError:
    """409 Conflict on a stale resourceVersion."""
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {resource_ref(plural, group)} "{name}": the object '
        "has been modified; please apply your changes to the latest version and try again",
        _details(name, group, plural),
    )


def forbidden(plural: str, group: str, name: str, why: str) -> ApiError:
    """403 Forbidden: ``pods "x" is forbidden: <why>``."""
    return ApiError(
        403,
        "Forbidden",
        f'{resource_ref(plural, group)} "{name}" is forbidden: {why}',
        _details(name, group, plural),
    )


def webhook_denied(webhook: str, message: str) -> ApiError:
    """403 from a validating webhook that denied the write, as the API server relays it."""
    return ApiError(
        403, "Forbidden", f'admission webhook "{webhook}" denied the request: {message}'
    )


def bad_request(message: str) -> ApiError:
    """400 BadRequest."""
    return ApiError(400, "BadRequest", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    """405 MethodNotAllowed."""
    return ApiError(405, "MethodNotAllowed", message)


BODY_TYPES = (
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
    "application/apply-patch+yaml",
)
PATCH_TYPES = BODY_TYPES[3:]


def unsupported_media(ctype: str, accepted: tuple[str, ...] = BODY_TYPES) -> ApiError:
    """415 UnsupportedMediaType, listing the media types that would have been accepted."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types "
        f'include: {", ".join(accepted)} (got "{ctype}")',
    )


class Cause:
    """One field error of a 422 Invalid answer."""

    def __init__(self, field: str, reason: str, message: str) -> None:
        self.field = field
        self.reason = reason  # FieldValueInvalid, FieldValueRequired, FieldValueNotSupported...
        self.message = message

    def as_dict(self) -> dict[str, str]:
        """The ``StatusCause`` form."""
        return {"reason": self.reason, "message": self.message, "field": self.field}


def invalid(kind: str, group: str, name: str, causes: list[Cause]) -> ApiError:
    """422 Invalid naming each field: ``RayCluster.ray.io "x" is invalid: <field>: <msg>``."""
    qualified = f"{kind}.{group}" if group else kind
    msgs = [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
    summary = msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"
    details: dict[str, Any] = {"name": name, "kind": kind, "causes": [c.as_dict() for c in causes]}
    if group:
        details["group"] = group
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {summary}', details)
