"""The Ray Serve service as the registry knows it."""

from __future__ import annotations

from clusters.domain.states import State
from clusters.domain.workload_kinds import REQUEUE, Details, Kind
from clusters.kinds.rayservice.states import SERVICE_RELEASES, SERVICE_TRANSITIONS

KIND = Kind(
    workload="service",
    api_version="ray.io/v1",
    object_kind="RayService",
    transitions=SERVICE_TRANSITIONS,
    releases=SERVICE_RELEASES,
    started=State.STARTING,
    started_message="its Ray cluster and Serve applications are starting",
    admitted_message="applying its RayService",
    applied_message="RayService applied; its Ray cluster and Serve applications are starting",
    engine="clusters.kinds.rayservice.engine",
    api="clusters.kinds.rayservice.api.ServiceViewSet",
    idle_reclaim="clusters.kinds.rayservice.scale_to_zero.reclaim_idle",
    ray_cluster_spec_at=("spec", "rayClusterConfig"),
    grows=True,
    # A service never ends by itself, so waiting would never drain the member; it is
    # requeued and comes up on another member. Its endpoint serves nothing until the new
    # RayService is ready (a short outage, like a scale-to-zero wake-up): running both side
    # by side would charge the tenant's quota twice, and need two placements per row.
    drain=REQUEUE,
    related=("service", "surge", "growth"),
    list_related=("service", "surge__flavor", "growth__flavor"),
    details=Details(
        model="clusters.models.Service",
        relation="service",
        # What a fold compares with the RayService's status before it writes it back.
        folded=(
            "applications",
            "active_cluster",
            "pending_cluster",
            "upgrading",
            "traffic",
            "serve_endpoints",
        ),
    ),
)
