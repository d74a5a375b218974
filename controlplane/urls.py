"""Top-level URL configuration.

The REST API lives under ``/api/v1/``: each app contributes its routes from
``<app>/api/urls.py``. OpenAPI is at ``/api/schema/`` and its documentation at
``/api/docs/`` (served from the sidecar package, no CDN).
"""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from controlplane import health

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics_view, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/v1/", include("tenants.api.urls")),
    path("api/v1/", include("clusters.api.urls")),
    path("admin/", admin.site.urls),
    path("", include("frontend.urls")),
]

# An unknown /api/ URL is a 404 in the API's error format (see controlplane/api/errors.py).
handler404 = "controlplane.api.errors.not_found"
