"""The OpenAPI schema class: drf-spectacular's, plus the errors each operation can answer.

drf-spectacular documents the success response only, so a client (or schemathesis)
reading the schema would take a 400, 404 or 429 for a breach of contract. Every error
has the one body of :class:`controlplane.api.errors.ErrorOut`; which statuses an
operation documents follows from what it has: a body can be malformed, too large or of
the wrong type; a query parameter can be invalid; authentication can be missing or the
role too low; a path names something that may not exist or be visible; a write can
clash with the current state; a throttled write can come too fast.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from rest_framework.permissions import SAFE_METHODS
from rest_framework.settings import api_settings

from controlplane.api.errors import ErrorOut

WRITES = ("POST", "PUT", "PATCH", "DELETE")

DESCRIPTIONS = {
    400: "Invalid input; `fields` names each offending field.",
    401: "Not authenticated.",
    403: "Authenticated, but not allowed to do this.",
    404: "No such object, or not visible to you (or a page past the last).",
    406: "The requested format is not offered here.",
    409: "Conflicts with the current state.",
    413: "The request body is too large.",
    415: "The request body is not JSON.",
    429: "Too many requests; retry after the time the message gives.",
}


class AutoSchema(SpectacularAutoSchema):
    """Adds the error responses (``{"error": {...}}``) an operation can give, and says
    that an optional query parameter given empty (``?role=``) counts as not given, as
    DRF, django-filter and the pagination treat it."""

    def get_operation(self, *args: Any, **kwargs: Any) -> Any:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "query" and not parameter.get("required"):
                parameter["allowEmptyValue"] = True
        error = self.resolve_serializer(ErrorOut, "response").ref
        media_types = self.map_renderers("media_type")
        for code in sorted(self._error_statuses(operation)):
            operation["responses"].setdefault(
                str(code),
                {
                    "description": DESCRIPTIONS[code],
                    "content": {media_type: {"schema": error} for media_type in media_types},
                },
            )
        return operation

    def _error_statuses(self, operation: dict[str, Any]) -> set[int]:
        parameters = operation.get("parameters", [])
        query = {p["name"] for p in parameters if p["in"] == "query"}
        fmt = api_settings.URL_FORMAT_OVERRIDE
        authenticated = any(requirement for requirement in operation.get("security", []))
        codes: set[int] = set()
        if self.method in ("POST", "PUT", "PATCH") or query - {fmt}:
            codes.add(400)
        if "requestBody" in operation:
            codes |= {413, 415}
        if authenticated:
            codes |= {401, 403}
            if self.method in WRITES:
                codes.add(409)
        if any(p["in"] == "path" for p in parameters) or "page" in query:
            codes.add(404)
        if fmt in query:
            codes.add(406)
        if self.method not in SAFE_METHODS and self.view.get_throttles():
            codes.add(429)
        return codes


def null_as_a_type(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Postprocessing hook: OpenAPI 3.0's ``nullable: true`` left in a 3.1 schema (DRF
    writes it into the pagination envelope's ``next``/``previous``) becomes 3.1's
    ``null`` type, which strict validators and generated clients read; 3.1 has no
    ``nullable`` keyword, so they would refuse the ``null`` it means to allow."""

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("nullable") is True and isinstance(node.get("type"), str):
                del node["nullable"]
                node["type"] = [node["type"], "null"]
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(result.get("components", {}))
    visit(result.get("paths", {}))
    return result
