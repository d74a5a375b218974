"""Helpers shared by the API's viewsets, independent of any app.

The tenant-scoped base every tenant-owned endpoint inherits is
:class:`tenants.api.viewsets.TenantScopedViewSet`: it needs the tenants app, which
this shared kit may not import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import wraps
from typing import Any

from drf_spectacular.utils import extend_schema
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


def create_action(
    body_in: Any,
    write: Callable[..., Any],
    out: Any,
    *,
    caller: str = "actor",
    from_view: tuple[str, ...] = (),
    errors: Mapping[int, Any] | None = None,
) -> Callable[..., Response]:
    """A viewset's ``create``, documented from what it does: ``body_in`` reads the
    request's body (a 400 when it is not valid), the service ``write`` makes the object
    and the answer is ``out`` of it, with 201 (``errors``: the other answers to document).

    ``write`` gets the caller under the keyword ``caller``, the view's attributes named in
    ``from_view`` (e.g. the tenant a scoped viewset resolved) and the body's fields.
    """

    @extend_schema(request=body_in, responses={201: out, **(errors or {})})
    def create(self: Any, request: Request, **url_kwargs: Any) -> Response:
        body = body_in(data=request.data)
        body.is_valid(raise_exception=True)
        given = {name: getattr(self, name) for name in from_view}
        made = write(**{caller: request.user}, **given, **body.validated_data)
        return Response(out(made).data, status=status.HTTP_201_CREATED)

    return create
