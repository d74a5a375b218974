"""The route of services' endpoints, ``/serve/{tenant}/{service}/{route...}``, mounted at
the site's root by ``controlplane/urls.py`` (docs/services.md)."""

from django.urls import re_path

from clusters.api.endpoint_views import serve_endpoint

urlpatterns = [
    re_path(
        r"^serve/(?P<slug>[-a-zA-Z0-9_]+)/(?P<name>[-a-z0-9]+)(?:/(?P<path>.*))?$",
        serve_endpoint,
        name="service-endpoint",
    ),
]
