"""Routes of the clusters API (cluster requests, dry-run, manifests, queue, usage)."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from clusters.api.views import ClusterViewSet

router = SimpleRouter()
router.register("clusters", ClusterViewSet, basename="cluster")

urlpatterns = [
    path("tenants/<slug:tenant_slug>/", include(router.urls)),
]
