"""One error format for the whole API: ``{"error": {"code", "message", "fields"?}}``.

DRF's handler decides the status code; this module only reshapes the body so that
clients parse every failure the same way. ``fields`` maps a field name (dotted for
nested fields) to a list of messages and is present for validation errors only.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from controlplane.exceptions import ServiceConflict


class Conflict(exceptions.APIException):
    """The request is well formed but clashes with the current state (HTTP 409)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state."
    default_code = "conflict"


class ErrorDetailOut(serializers.Serializer):
    """What went wrong: a stable code, a sentence, and per-field messages if any."""

    code = serializers.CharField()
    message = serializers.CharField()
    # DRF takes declared fields off the class, so this does not shadow Serializer.fields.
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()), required=False
    )


class ErrorOut(serializers.Serializer):
    """The body of every error response (documented on each operation of the schema)."""

    error = ErrorDetailOut()


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """Turn DRF's nested error detail into ``{"a.b": ["message", ...]}``."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            out.update(_flatten(value, name))
    elif isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            out[prefix or "non_field_errors"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                out.update(_flatten(item, f"{prefix}[{index}]" if prefix else str(index)))
    else:
        out[prefix or "non_field_errors"] = [str(detail)]
    return out


def error_body(code: str, message: str, fields: dict[str, list[str]] | None = None) -> dict:
    """The body of every error response."""
    error: dict[str, Any] = {"code": code, "message": message}
    if fields:
        error["fields"] = fields
    return {"error": error}


def _as_api_exception(exc: Exception) -> Exception:
    """The DRF exception that stands for ``exc``: Django's and the services' exceptions
    become the REST framework's, so that DRF's handler gives them their status codes."""
    if isinstance(exc, RequestDataTooBig):
        too_big = exceptions.ValidationError(
            {"non_field_errors": ["The request body is too large."]}
        )
        too_big.status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
        return too_big
    if isinstance(exc, DjangoValidationError):
        return exceptions.ValidationError(
            exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        )
    if isinstance(exc, Http404):
        return exceptions.NotFound()
    if isinstance(exc, ServiceConflict):
        return Conflict(exc.message, code=exc.code)
    if isinstance(exc, PermissionDenied):
        # Services raise Django's PermissionDenied (they know no HTTP); keep their reason.
        return exceptions.PermissionDenied(str(exc) or None)
    return exc


def _validation_body(
    exc: exceptions.ValidationError, status_code: int, invalid_code: str
) -> dict[str, Any]:
    """The body of a 400 (the first field's first message, and every field's) or a 413."""
    if status_code == status.HTTP_413_REQUEST_ENTITY_TOO_LARGE:
        return error_body("too_large", "The request body is too large.")
    fields = _flatten(exc.detail)
    first = next(iter(fields.items()), ("", ["Invalid input."]))
    where = "" if first[0] == "non_field_errors" else f"{first[0]}: "
    return error_body(invalid_code, f"{where}{first[1][0]}", fields)


def _error_code(exc: Exception) -> str:
    """The stable code of a non-validation error: DRF's code for it, else ``error``."""
    if not isinstance(exc, exceptions.APIException):
        return "error"
    codes = exc.get_codes()
    return codes if isinstance(codes, str) else getattr(exc, "default_code", "error")


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler producing the single error format."""
    # A service's ValidationError may name a more precise code than "invalid".
    invalid_code = getattr(exc, "error_code", "invalid")
    exc = _as_api_exception(exc)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        response.data = _validation_body(exc, response.status_code, invalid_code)
        return response
    detail = getattr(exc, "detail", str(exc))
    message = str(detail) if not isinstance(detail, dict | list) else str(exc)
    response.data = error_body(_error_code(exc), message)
    return response
