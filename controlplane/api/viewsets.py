"""Helpers shared by the API's viewsets, independent of any app.

The tenant-scoped base every tenant-owned endpoint inherits is
:class:`tenants.api.viewsets.TenantScopedViewSet`: it needs the tenants app, which
this shared kit may not import.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from rest_framework.request import Request

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
