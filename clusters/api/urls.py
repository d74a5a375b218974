"""Routes of the clusters API (cluster requests, jobs, services, dry-run, manifests,
queue, usage, images)."""

from django.urls import include, path, re_path
from rest_framework.routers import SimpleRouter

from clusters.api.images import ImageListView
from clusters.api.jobs import JobViewSet
from clusters.api.queue_views import GlobalQueueView, TenantQueueViewSet, TenantUsageViewSet
from clusters.api.ray_views import ray_proxy
from clusters.api.serving import ServiceViewSet
from clusters.api.tunnel_views import tunnel
from clusters.api.views import ClusterViewSet

router = SimpleRouter()
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("jobs", JobViewSet, basename="job")
router.register("services", ServiceViewSet, basename="service")

urlpatterns = [
    # Before the router: ``{name}/ray/`` would otherwise be taken for an action's path.
    re_path(
        r"^tenants/(?P<tenant_slug>[-a-zA-Z0-9_]+)/clusters/(?P<name>[-a-z0-9]+)/ray/(?P<path>.*)$",
        ray_proxy,
        name="cluster-ray-proxy",
    ),
    re_path(
        r"^tenants/(?P<tenant_slug>[-a-zA-Z0-9_]+)/clusters/(?P<name>[-a-z0-9]+)/tunnel/$",
        tunnel,
        name="cluster-tunnel",
    ),
    path("tenants/<slug:tenant_slug>/", include(router.urls)),
    path(
        "tenants/<slug:tenant_slug>/queue/",
        TenantQueueViewSet.as_view({"get": "list"}),
        name="tenant-queue",
    ),
    path(
        "tenants/<slug:tenant_slug>/usage/",
        TenantUsageViewSet.as_view({"get": "retrieve"}),
        name="tenant-usage",
    ),
    path("queue/", GlobalQueueView.as_view(), name="queue"),
    path("images/", ImageListView.as_view(), name="images"),
]
