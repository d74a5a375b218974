"""A service as the API returns it: the request's fields and its serving details."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from clusters.kinds.rayservice import endpoint_counts
from clusters.models import ClusterRequest
from clusters.output.request import ClusterOut, EndpointsOut
from controlplane.api import generics as drf


def endpoint_url(slug: str, name: str) -> str:
    """A service's endpoint through the product (``endpoint_relay.py``)."""
    return f"{settings.PUBLIC_BASE_URL}/serve/{slug}/{name}/"


def curl_example(url: str, public: bool) -> str:
    """A request to the endpoint, for the page and the API to show."""
    auth = "" if public else ' -H "Authorization: Bearer $GANGWAY_TOKEN"'
    return f"curl{auth} {url}"


class ServiceEndpointOut(drf.Serializer):
    """Where and how a service is called through the product."""

    url = serializers.CharField(help_text="The endpoint: add an application's route.")
    public = serializers.BooleanField(help_text="Whether it answers callers without a token.")
    requests = serializers.IntegerField(help_text="Requests relayed through the endpoint.")
    curl = serializers.CharField(help_text="An example request.")


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
    service_endpoint = serializers.SerializerMethodField()

    class Meta(ClusterOut.Meta):
        fields = [
            *[f for f in ClusterOut.Meta.fields if f not in ("ttl_hours", "suspended_at")],
            "service",
            "service_endpoint",
        ]
        read_only_fields = fields

    @extend_schema_field(EndpointsOut(allow_null=True))
    def get_endpoints(self, obj: ClusterRequest) -> dict[str, Any] | None:
        return None  # no endpoint through the product yet (docs/services.md)

    @extend_schema_field(ServiceEndpointOut)
    def get_service_endpoint(self, obj: ClusterRequest) -> dict[str, Any]:
        url = endpoint_url(obj.tenant.slug, obj.name)
        details = obj.service
        return {
            "url": url,
            "public": details.public,
            "requests": endpoint_counts.requests_total(details),
            "curl": curl_example(url, details.public),
        }
