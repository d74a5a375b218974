"""Helpers shared by the API's viewsets, independent of any app.

The tenant-scoped base every tenant-owned endpoint inherits is
:class:`tenants.api.viewsets.TenantScopedViewSet`: it needs the tenants app, which
this shared kit may not import.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.api.serializers import EmptyBodyIn


def bodyless(handler: Callable[..., Any]) -> Callable[..., Any]:
    """Marks a POST action that takes no body: any key in one is a 400 naming it.

    Apply it under ``@action`` and document the action with ``extend_schema(request=None)``;
    tests/access/test_bodies.py sends a key to every body-less route of the access tables.
    """

    @wraps(handler)
    def checked(self: Any, request: Request, *args: Any, **kwargs: Any) -> Any:
        EmptyBodyIn(data=request.data).is_valid(raise_exception=True)
        return handler(self, request, *args, **kwargs)

    return checked


def created(
    request: Request, body_in: Any, write: Callable[..., Any], out: Any, **given: Any
) -> Response:
    """The common create: ``body_in`` reads the request's body (a 400 when it is not
    valid), the service ``write`` makes the object from its fields and ``given``, and the
    answer is ``out`` of what it made, with 201."""
    body = body_in(data=request.data)
    body.is_valid(raise_exception=True)
    made = write(**given, **body.validated_data)
    return Response(out(made).data, status=status.HTTP_201_CREATED)
