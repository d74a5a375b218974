"""A service as the API returns it: the request's fields and its serving details."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from clusters.kinds.rayservice import endpoint_counts, growth, upgrade
from clusters.models import ClusterEvent, ClusterRequest, Growth, QueuedGpus, Service, Surge
from clusters.output.request import UnattendedOut
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


class TrafficSideOut(drf.Serializer):
    """One cluster of an incremental upgrade, as KubeRay reports it."""

    cluster = serializers.CharField(help_text="The RayCluster.")
    target_capacity = serializers.IntegerField(
        help_text="KubeRay's targetCapacity: the percent of the service's capacity it may run."
    )
    traffic_routed_percent = serializers.IntegerField(
        help_text="KubeRay's trafficRoutedPercent: the percent of requests routed to it."
    )


class TrafficSplitOut(drf.Serializer):
    """The old (``active``) and new (``pending``) clusters side by side while an
    incremental upgrade moves capacity and traffic from one to the other."""

    active = TrafficSideOut()
    pending = TrafficSideOut()


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
    traffic_split = serializers.SerializerMethodField(
        help_text="An incremental upgrade's split while it runs (null otherwise)."
    )
    serve_endpoints = serializers.IntegerField(help_text="Ready pods behind its serve service.")
    scale_to_zero = serializers.BooleanField(
        help_text="Whether it scales to zero after its window without requests."
    )
    scale_to_zero_after_minutes = serializers.IntegerField(
        help_text="The window without requests, in minutes."
    )
    last_request_at = serializers.SerializerMethodField(
        help_text="The last request relayed through its endpoint (null: none yet)."
    )
    woken_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When a request woke it from zero; null once it serves again.",
    )

    @extend_schema_field(TrafficSplitOut(allow_null=True))
    def get_traffic_split(self, details: Service) -> dict[str, Any] | None:
        return TrafficSplitOut(details.traffic).data if details.traffic else None

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_last_request_at(self, details: Service) -> str | None:
        cached = endpoint_counts.last_requests([details.pk]).get(details.pk)
        moments = [m for m in (details.last_request_at, cached) if m]
        return serializers.DateTimeField().to_representation(max(moments)) if moments else None


class QueuedGpusOut(drf.Serializer):
    """GPUs a service asks for beside those it holds, and where they stand in the queue."""

    gpus = serializers.DecimalField(max_digits=10, decimal_places=3)
    flavor = serializers.CharField()
    message = serializers.CharField(help_text="What it waits for, while it does.")
    position = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField(help_text="The queue's reason code while it waits.")
    eta = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    admitted_at = serializers.DateTimeField(allow_null=True)


def queued_gpus_out(row: QueuedGpus) -> dict[str, Any]:
    """A surge's or growth's fields of :class:`QueuedGpusOut`."""
    return {
        "gpus": row.gpus,
        "flavor": row.flavor.name,
        "message": row.queue_message,
        "position": row.queue_position,
        "reason": row.queue_reason,
        "eta": row.queue_eta,
        "created_at": row.created_at,
        "admitted_at": row.admitted_at,
    }


class UpgradeSurgeOut(QueuedGpusOut):
    """The GPUs an upgrade to a new Ray cluster takes beside the serving one, and where
    they stand: ``waiting`` in the queue (with its position, reason, message and ETA),
    ``admitted`` (charged; the change is being applied) or ``applied`` (charged until
    KubeRay switched and the old cluster is gone)."""

    state = serializers.CharField(help_text="waiting, admitted or applied.")
    image = serializers.CharField(allow_null=True, help_text="The image it upgrades to.")
    serve_config_changed = serializers.BooleanField(
        help_text="Whether it also brings a new Serve config (shown once applied)."
    )


def surge_out(surge: Surge | None) -> dict[str, Any] | None:
    """A service's upgrade surge as :class:`UpgradeSurgeOut` shows it (``None``: none)."""
    if surge is None:
        return None
    state = (
        "waiting" if surge.admitted_at is None else "applied" if surge.applied_at else "admitted"
    )
    return {
        **queued_gpus_out(surge),
        "state": state,
        "image": surge.change.get("image"),
        "serve_config_changed": "serve_config" in surge.change,
    }


class GrowthOut(QueuedGpusOut):
    """Workers an autoscaling service asked for beyond its guaranteed size: ``waiting``
    in the queue (position, reason, message, ETA) or ``admitted`` (held, borrowable: a
    reclaim takes it back by shrinking the service to its guaranteed size)."""

    state = serializers.CharField(help_text="waiting or admitted.")
    workers = serializers.IntegerField()


class ReclaimOut(drf.Serializer):
    """When a growth was last taken back, and why."""

    at = serializers.DateTimeField()
    message = serializers.CharField()


class AutoscaleOut(drf.Serializer):
    """An autoscaling service's size: charged at ``min_workers``, running up to
    ``may_run_workers`` (its guaranteed size plus the growth admitted), never past
    ``max_workers``."""

    min_workers = serializers.IntegerField()
    max_workers = serializers.IntegerField()
    may_run_workers = serializers.IntegerField()
    growth = GrowthOut(allow_null=True)
    last_reclaim = ReclaimOut(allow_null=True)


def autoscale_out(
    row: ClusterRequest, events: Iterable[ClusterEvent] | None = None
) -> dict[str, Any] | None:
    """An autoscaling service's size and growth as :class:`AutoscaleOut` shows it
    (``None``: a fixed-size service), from its loaded growth and ``events`` (its recent
    events as loaded with it unless given): a representation queries nothing per row."""
    found = growth.bounds(row)
    if found is None:
        return None
    try:
        grown: Growth | None = row.growth
    except Growth.DoesNotExist:
        grown = None
    seen = getattr(row, "recent_events", []) if events is None else events
    taken = next((e for e in seen if e.reason == "growth_reclaimed"), None)
    return {
        "min_workers": found[0],
        "max_workers": found[1],
        "may_run_workers": growth.cap(row, grown),
        "growth": None
        if grown is None
        else {
            **queued_gpus_out(grown),
            "state": "waiting" if grown.admitted_at is None else "admitted",
            "workers": grown.workers,
        },
        "last_reclaim": None if taken is None else {"at": taken.at, "message": taken.message},
    }


class ServiceOut(UnattendedOut):
    """A service as the API returns it: the request's fields (state, queue, GPUs,
    history), its serving details (``service``) and the surge of an upgrade under way
    (``upgrade_surge``, null without one)."""

    service = ServingOut()
    service_endpoint = serializers.SerializerMethodField()
    upgrade_surge = serializers.SerializerMethodField()
    autoscale = serializers.SerializerMethodField()

    class Meta(UnattendedOut.Meta):
        fields = [
            *UnattendedOut.Meta.fields,
            "service",
            "service_endpoint",
            "upgrade_surge",
            "autoscale",
        ]
        read_only_fields = fields

    @extend_schema_field(AutoscaleOut(allow_null=True))
    def get_autoscale(self, obj: ClusterRequest) -> dict[str, Any] | None:
        found = autoscale_out(obj)
        return AutoscaleOut(found).data if found is not None else None

    @extend_schema_field(UpgradeSurgeOut(allow_null=True))
    def get_upgrade_surge(self, obj: ClusterRequest) -> dict[str, Any] | None:
        found = surge_out(upgrade.surge_of(obj))
        return UpgradeSurgeOut(found).data if found is not None else None

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
