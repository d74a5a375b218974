"""``OPTIONS`` on any API route: which methods the caller may use there, and nothing to
anyone who may use none.

DRF's own answer looks the object up with ``get_object``, which assumes a lookup keyword
not every route has, and answers 200 to a caller every method refuses. Here the route is
checked as each of its methods would be (authentication, permissions, the object the URL
names): every method refusing gives the first refusal, otherwise the methods the caller
may use. Field descriptions are the OpenAPI schema's.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import APIException
from rest_framework.metadata import BaseMetadata
from rest_framework.request import Request, clone_request

# Methods that only describe or repeat another (HEAD is GET without a body).
_DESCRIPTIVE = frozenset({"OPTIONS", "HEAD"})


def _names_an_object(view: Any) -> bool:
    """Whether the URL names one object that the view looks up with ``get_object``."""
    lookup = getattr(view, "lookup_url_kwarg", None) or getattr(view, "lookup_field", None)
    return bool(lookup) and lookup in view.kwargs and hasattr(view, "get_object")


def usable_methods(request: Request, view: Any) -> list[str]:
    """The methods of the route the caller may use; raises the first method's refusal
    when there is none, and a 404 when the URL names an object the caller cannot see."""
    allowed = [method for method in view.allowed_methods if method not in _DESCRIPTIVE]
    target = view.get_object() if _names_an_object(view) else None
    usable: list[str] = []
    refusal: APIException | None = None
    action = getattr(view, "action", None)
    action_map = getattr(view, "action_map", None) or {}
    try:
        for method in allowed:
            view.request = clone_request(request, method)
            if action_map:
                view.action = action_map.get(method.lower())
            try:
                view.check_permissions(view.request)
                if target is not None:
                    view.check_object_permissions(view.request, target)
            except APIException as exc:
                refusal = refusal or exc
            else:
                usable.append(method)
    finally:
        view.request = request
        if action_map:
            view.action = action
    if refusal is not None and not usable:
        raise refusal
    return usable


class Metadata(BaseMetadata):
    """``DEFAULT_METADATA_CLASS``: the view's name and description, its formats, and
    the methods the caller may use."""

    def determine_metadata(self, request: Request, view: Any) -> dict[str, Any]:
        return {
            "name": view.get_view_name(),
            "description": view.get_view_description(),
            "renders": [renderer.media_type for renderer in view.renderer_classes],
            "parses": [parser.media_type for parser in view.parser_classes],
            "methods": usable_methods(request, view),
        }
