"""Service endpoints under ``/api/v1/tenants/{slug}/services/``: create, list, detail,
update (a new Serve config or image: an upgrade; the idle policy), delete and a dry-run.

A service's body is a cluster request's shape plus its Serve config and upgrade
strategy; the checks are the services' (:mod:`clusters.kinds.rayservice.requests`), and the
dry-run is the clusters' verdict with the service's RayService as its manifest.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from clusters.api.kind_views import KIND_ROLES, KindViewSet, KindWrites
from clusters.api.serializers import ClusterCreateInput
from clusters.kinds.rayservice import requests as serving
from clusters.kinds.rayservice.endpoint_access_actions import ServiceEndpointActions
from clusters.kinds.rayservice.kind import KIND as SERVICE_KIND
from clusters.kinds.rayservice.output import ServiceOut
from clusters.kinds.rayservice.spec import (
    MAX_SERVE_CONFIG,
    SCALE_TO_ZERO_BOUNDS,
    SCALE_TO_ZERO_MINUTES,
    UPGRADE_OPTIONS,
    UPGRADE_TYPES,
    ServiceSpec,
)
from clusters.models import ClusterRequest
from clusters.rows.spec import ClusterSpec
from controlplane.api.serializers import StrictSerializer
from tenants.models import Role

SERVE_CONFIG_HELP = (
    "Ray Serve's config (KubeRay's serveConfigV2) as YAML: applications with name, "
    "import_path, route_prefix and deployments (num_replicas or autoscaling_config, "
    "ray_actor_options with num_gpus)."
)


SCALE_TO_ZERO_HELP = (
    "Give its GPUs back after scale_to_zero_after_minutes without an endpoint request; "
    "the next request wakes it (a cold start: 503 with Retry-After until it is ready)."
)
WINDOW_HELP = "Minutes without requests before it scales to zero ({}-{}).".format(
    *SCALE_TO_ZERO_BOUNDS
)
LOW, HIGH = SCALE_TO_ZERO_BOUNDS


class UpgradeStrategyIn(StrictSerializer):
    """KubeRay's ``upgradeStrategy``: ``type`` and, for an incremental upgrade, its
    ``cluster_upgrade_options`` (``maxSurgePercent``, ``stepSizePercent``,
    ``intervalSeconds``; checked by the service)."""

    type = serializers.ChoiceField(choices=UPGRADE_TYPES, default="NewCluster")
    cluster_upgrade_options = serializers.DictField(
        child=serializers.JSONField(),
        required=False,
        default=dict,
        help_text="With NewClusterWithIncrementalUpgrade: " + ", ".join(UPGRADE_OPTIONS) + ".",
    )


class ServiceCreateInput(ClusterCreateInput):
    """A cluster request's body without ``ttl_hours`` (a service runs until deleted),
    plus ``serve_config`` and ``upgrade_strategy``."""

    ttl_hours = None  # type: ignore[assignment]
    serve_config = serializers.CharField(
        max_length=MAX_SERVE_CONFIG, trim_whitespace=False, help_text=SERVE_CONFIG_HELP
    )
    upgrade_strategy = UpgradeStrategyIn(required=False)
    scale_to_zero = serializers.BooleanField(default=False, help_text=SCALE_TO_ZERO_HELP)
    scale_to_zero_after_minutes = serializers.IntegerField(
        default=SCALE_TO_ZERO_MINUTES, min_value=LOW, max_value=HIGH, help_text=WINDOW_HELP
    )


class ServiceUpdateInput(StrictSerializer):
    """Body of ``PATCH .../services/{name}/``: a new Serve config and/or image, and/or
    the idle policy."""

    serve_config = serializers.CharField(
        required=False, max_length=MAX_SERVE_CONFIG, trim_whitespace=False
    )
    image = serializers.CharField(required=False, max_length=255)
    scale_to_zero = serializers.BooleanField(required=False, help_text=SCALE_TO_ZERO_HELP)
    scale_to_zero_after_minutes = serializers.IntegerField(
        required=False, min_value=LOW, max_value=HIGH, help_text=WINDOW_HELP
    )


def _split(data: dict[str, Any]) -> dict[str, Any]:
    return {"spec": ClusterSpec.from_data(data), "service": ServiceSpec.from_data(data)}


class ServiceViewSet(ServiceEndpointActions, KindViewSet):
    """Ray Serve services of one tenant, looked up by name."""

    kind = SERVICE_KIND
    create_input = ServiceCreateInput
    serializer_class = ServiceOut
    writes = KindWrites(
        split=_split,
        create=serving.service_create,
        delete=serving.service_delete,
        dry_run=serving.service_dry_run,
    )
    action_roles = {
        **KIND_ROLES,
        "partial_update": Role.ENGINEER,
        # The services decide further: the owner or an admin; public, an admin only.
        "tokens": Role.ENGINEER,
        "token_revoke": Role.ENGINEER,
        "public": Role.ADMIN,
    }

    @extend_schema(request=ServiceUpdateInput, responses=ServiceOut)
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        body = ServiceUpdateInput(data=request.data)
        body.is_valid(raise_exception=True)
        row: ClusterRequest = serving.service_update(
            actor=request.user,
            request=self.get_object(),
            role=self.tenant_role,
            **body.validated_data,
        )
        return self._out(row)
