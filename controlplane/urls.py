"""Top-level URL configuration.

The REST API lives under ``/api/v1/``: each app contributes its routes from
``<app>/api/urls.py``. OpenAPI is at ``/api/schema/`` and its documentation at
``/api/docs/`` (served from the sidecar package, no CDN; its init script is a request
of its own, so the page needs no inline script under the Content-Security-Policy).
"""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from controlplane import health

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics_view, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(
            url_name="api-schema", template_name="controlplane/swagger_ui.html"
        ),
        name="api-docs",
    ),
    path("api/v1/", include("tenants.api.urls")),
    path("api/v1/", include("clusters.api.urls")),
    path("api/v1/", include("notifications.api.urls")),
    path("admin/", admin.site.urls),
    # Services' endpoints (docs/services.md): any method, any route under the service.
    path("", include("clusters.kinds.rayservice.endpoint_urls")),
    path("", include("frontend.urls")),
]

# Styled pages that give the reason (JSON under /api/); see frontend/views/errors.py.
handler403 = "frontend.views.errors.permission_denied"
handler404 = "frontend.views.errors.page_not_found"
handler500 = "frontend.views.errors.server_error"
