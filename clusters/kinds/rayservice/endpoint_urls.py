"""The route of services' endpoints, ``/serve/{tenant}/{service}/{route...}``, mounted at
the site's root by ``controlplane/urls.py`` (docs/services.md)."""

from django.urls import re_path

from clusters.kinds.rayservice.endpoint_view import serve_endpoint

# Any segment is taken (a malformed name is the endpoint's JSON 404, as the API's are).
urlpatterns = [
    re_path(
        r"^serve/(?P<slug>[^/]+)/(?P<name>[^/]+)/(?P<path>.*)$",
        serve_endpoint,
        name="service-endpoint",
    ),
]
