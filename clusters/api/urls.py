"""Routes of the clusters API (cluster requests, jobs, services, dry-run, manifests,
queue, usage, images, the fleet's Kubernetes clusters, fair share)."""

from django.urls import include, path, re_path
from django.utils.module_loading import import_string
from rest_framework.routers import SimpleRouter

from clusters.api.cost_views import PricesView, TenantCostCapsView
from clusters.api.fair_share_views import FairShareView
from clusters.api.images import ImageListView
from clusters.api.kube_cluster_views import KubeClusterViewSet
from clusters.api.preemption_views import PreemptionCheckpointView, PreemptionNoticeView
from clusters.api.queue_views import GlobalQueueView, TenantQueueViewSet, TenantUsageViewSet
from clusters.api.quota_cap_views import QuotaCapsView
from clusters.api.ray_views import ray_proxy
from clusters.api.tunnel_views import tunnel
from clusters.api.views import ClusterViewSet
from clusters.domain.workload_kinds import kinds

router = SimpleRouter()
router.register("clusters", ClusterViewSet, basename="cluster")
# Every other kind's API, named by the registry (the kinds sit above the interfaces).
for kind in kinds().values():
    if kind.api:
        router.register(kind.section, import_string(kind.api), basename=kind.noun)

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
    path(
        "tenants/<slug:tenant_slug>/cost-caps/",
        TenantCostCapsView.as_view(),
        name="tenant-cost-caps",
    ),
    path("queue/", GlobalQueueView.as_view(), name="queue"),
    # A run's preemption notice and checkpoint reports, by its token (docs/preemption.md).
    path("preemption/<str:token>/", PreemptionNoticeView.as_view(), name="preemption-notice"),
    path(
        "preemption/<str:token>/checkpoint/",
        PreemptionCheckpointView.as_view(),
        name="preemption-checkpoint",
    ),
    path("images/", ImageListView.as_view(), name="images"),
    # The fleet's Kubernetes clusters (platform admins; clusters/api/kube_cluster_views.py).
    path(
        "platform/kube-clusters/",
        KubeClusterViewSet.as_view({"get": "list", "post": "create"}),
        name="kube-clusters",
    ),
    path(
        "platform/kube-clusters/<slug:name>/",
        KubeClusterViewSet.as_view(
            {"get": "retrieve", "patch": "partial_update", "delete": "destroy"}
        ),
        name="kube-cluster",
    ),
    path(
        "platform/kube-clusters/<slug:name>/stock/",
        KubeClusterViewSet.as_view({"put": "stock"}),
        name="kube-cluster-stock",
    ),
    path("platform/quota-caps/", QuotaCapsView.as_view(), name="quota-caps"),
    path("platform/prices/", PricesView.as_view(), name="prices"),
    path("platform/fair-share/", FairShareView.as_view(), name="fair-share"),
    *[
        path(
            f"platform/kube-clusters/<slug:name>/{verb}/",
            KubeClusterViewSet.as_view({"post": verb}),
            name=f"kube-cluster-{verb}",
        )
        for verb in ("cordon", "uncordon", "drain", "check")
    ],
]
