"""The route of services' endpoints, ``/serve/{tenant}/{service}/{route...}``, mounted at
the site's root by ``controlplane/urls.py`` (docs/services.md), and its view.

The view is a plain Django view: callers are programs with tokens, never a signed-in
browser (no cookie authenticates, so no CSRF), and every answer carries
``Content-Security-Policy: sandbox``, as the Ray proxy's do, so what a service returns
never runs as the product's origin. The relay and its refusals are ``endpoint_relay.py``.
"""

from __future__ import annotations

from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.urls import re_path
from django.views.decorators.csrf import csrf_exempt

from clusters.kinds.rayservice.endpoint_relay import relay


@csrf_exempt
def serve_endpoint(request: HttpRequest, slug: str, name: str, path: str) -> HttpResponseBase:
    """Relay the request to the service's Serve proxy (see the module)."""
    response = relay(request, slug=slug, name=name, path=path)
    # Read by django-csp's middleware, as its decorators set it.
    setattr(response, "_csp_update", {"sandbox": True})  # noqa: B010
    return response


# Any segment is taken (a malformed name is the endpoint's JSON 404, as the API's are).
urlpatterns = [
    re_path(
        r"^serve/(?P<slug>[^/]+)/(?P<name>[^/]+)/(?P<path>.*)$",
        serve_endpoint,
        name="service-endpoint",
    ),
]
