"""A service as the API returns it: the request's fields and its serving details."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from clusters.models import ClusterRequest
from clusters.output.request import ClusterOut, EndpointsOut
from controlplane.api import generics as drf


class UpgradeStrategyOut(drf.Serializer):
    """How a new Ray cluster config is rolled out (KubeRay's ``upgradeStrategy``)."""

    type = serializers.CharField(source="upgrade_type")
    cluster_upgrade_options = serializers.JSONField(source="upgrade_options")


class ServingOut(drf.Serializer):
    """What a service serves and how KubeRay last reported it."""

    serve_config = serializers.CharField(help_text="Ray Serve's config (serveConfigV2), YAML.")
    upgrade_strategy = UpgradeStrategyOut(source="*")
    applications = serializers.JSONField(
        help_text="By application: status, message and its deployments' statuses."
    )
    active_cluster = serializers.CharField(help_text="The RayCluster serving now.")
    pending_cluster = serializers.CharField(help_text="The RayCluster being upgraded to.")
    upgrading = serializers.BooleanField()
    serve_endpoints = serializers.IntegerField(help_text="Ready pods behind its serve service.")


class ServiceOut(ClusterOut):
    """A service as the API returns it: the request's fields (state, queue, GPUs,
    history) and its serving details (``service``)."""

    service = ServingOut()

    class Meta(ClusterOut.Meta):
        fields = [
            *[f for f in ClusterOut.Meta.fields if f not in ("ttl_hours", "suspended_at")],
            "service",
        ]
        read_only_fields = fields

    @extend_schema_field(EndpointsOut(allow_null=True))
    def get_endpoints(self, obj: ClusterRequest) -> dict[str, Any] | None:
        return None  # no endpoint through the product yet (docs/services.md)
