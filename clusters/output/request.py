"""The read representation of a cluster request (the public contract's fields)."""

from __future__ import annotations

from functools import cached_property
from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import Field, SkipField
from rest_framework.relations import PKOnlyObject, RelatedField

from clusters.domain.images import ray_version, resolve_image
from clusters.models import ClusterEvent, ClusterRequest
from clusters.queue.waiting import waiting
from clusters.selectors import cluster_activity, cluster_endpoints, staleness
from controlplane.api import generics as drf


class _Missing:
    """No value found the quick way: the field's own ``get_attribute`` decides."""


_MISSING = _Missing()


# Fields whose ``to_representation`` reads nothing but the value (no context, no parent,
# no child serializer): one bound instance of each can serve every serializer of a class.
_SELF_CONTAINED = (
    serializers.BooleanField,
    serializers.CharField,
    serializers.ChoiceField,
    serializers.DateField,
    serializers.DateTimeField,
    serializers.DecimalField,
    serializers.FloatField,
    serializers.IntegerField,
    serializers.JSONField,
    serializers.ReadOnlyField,
    serializers.UUIDField,
)

# (field name, field, source attributes or None for DRF's path, method of a
# SerializerMethodField or None)
Plan = list[tuple[str, Field[Any, Any, Any, Any], tuple[str, ...] | None, str | None]]


def _self_contained(field: Field[Any, Any, Any, Any], *, nested: bool = False) -> bool:
    if isinstance(field, serializers.SerializerMethodField):
        # Called as a method of the serializer at hand, never through the field; a nested
        # serializer's would be called on the template's child, whose context is empty.
        return not nested
    if isinstance(field, (serializers.DictField, serializers.ListField)):
        return isinstance(field.child, _SELF_CONTAINED)
    if (
        isinstance(field, serializers.Serializer)
        and type(field).to_representation is serializers.Serializer.to_representation
    ):
        # A nested plain serializer (a job's run) renders its value through its own
        # fields: self-contained when they all are.
        return all(_self_contained(child, nested=True) for child in field.fields.values())
    return isinstance(field, _SELF_CONTAINED)


class FlatModelOut(drf.ModelSerializer):
    """A read-only model serializer whose ``to_representation`` reads each field's source
    with plain ``getattr`` calls, in a plan made once per class.

    DRF's own loop asks ``_readable_fields`` for the fields, and each field's
    ``get_attribute`` walks its source through ``isinstance(Mapping)`` and callable checks,
    for every field of every row: two thirds of a page of 50 clusters' serialization.
    And a ModelSerializer builds its fields again for every instance (model
    introspection, deep copies): two thirds of the time of one cluster's answer (a
    create's, a detail's). The plan is made once, from a serializer of the class without
    context, when every field is one whose output depends on its value alone (else once
    per serializer, from its own fields); methods of ``SerializerMethodField`` are called
    on the serializer at hand. The values are still rendered by each field's
    ``to_representation``, so the output is the same, and anything the quick read cannot
    take (a mapping, a callable, a missing attribute, a related field) goes through DRF's
    ``get_attribute``.
    """

    _plan_of_class: ClassVar[Plan | None]  # set on each class by _shared_plan

    @classmethod
    def _shared_plan(cls) -> Plan | None:
        if "_plan_of_class" not in cls.__dict__:
            template = cls(context={})
            plan = template._own_plan()
            shared = all(_self_contained(field) for _, field, _, _ in plan)
            cls._plan_of_class = plan if shared else None
        return cls.__dict__["_plan_of_class"]  # type: ignore[no-any-return]

    def _own_plan(self) -> Plan:
        return [
            (
                str(field.field_name),  # bound fields always have their name
                field,
                # None: DRF's path (a related field may answer a PKOnlyObject).
                None if isinstance(field, RelatedField) else tuple(field.source_attrs),
                field.method_name if isinstance(field, serializers.SerializerMethodField) else None,
            )
            for field in self._readable_fields
        ]

    @cached_property
    def _plan(self) -> Plan:
        return self._shared_plan() or self._own_plan()

    def to_representation(self, instance: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, field, attrs, method in self._plan:
            if method is not None:
                out[name] = getattr(self, method)(instance)
                continue
            value: Any = _MISSING
            if attrs is not None:
                value = instance
                try:
                    for attr in attrs:
                        value = getattr(value, attr)
                except Exception:  # noqa: BLE001 - DRF's path below says what it means
                    value = _MISSING
                if callable(value):  # DRF would call it
                    value = _MISSING
            if value is _MISSING:
                try:
                    value = field.get_attribute(instance)
                except SkipField:
                    continue
                if isinstance(value, PKOnlyObject):
                    value = None if value.pk is None else value
            out[name] = None if value is None else field.to_representation(value)
        return out


class ClusterEventOut(FlatModelOut):
    """One entry of a cluster's history."""

    class Meta:
        model = ClusterEvent
        fields = ["at", "actor_name", "from_state", "to_state", "reason", "message"]


class QueueFlavorOut(drf.Serializer):
    """Where a request that accepts several flavors stands on one of them."""

    flavor = serializers.CharField()
    position = serializers.IntegerField()
    reason = serializers.CharField()
    message = serializers.CharField()
    eta = serializers.DateTimeField(allow_null=True)


class QueueOut(drf.Serializer):
    """Where a waiting request stands. For a request that accepts several flavors,
    ``flavors`` is its standing on each, in its order of preference; ``eta`` is then
    the best of them (empty for a request of one flavor)."""

    position = serializers.IntegerField(allow_null=True)
    flavor_position = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField()
    message = serializers.CharField()
    eta = serializers.DateTimeField(allow_null=True)
    flavors = QueueFlavorOut(many=True)


def accepted_flavors(obj: ClusterRequest) -> list[str]:
    """The flavors a request accepts, most preferred first (older rows: its flavor)."""
    return list(obj.accepted_flavors) or [obj.flavor.name]


class EndpointsOut(drf.Serializer):
    """How to connect to a ready cluster (docs/access.md): through the control plane's
    proxy from anywhere, by ``kubectl port-forward``, or by in-cluster service names."""

    dashboard_url = serializers.CharField(help_text="In-cluster URL of the Ray dashboard.")
    client_address = serializers.CharField(help_text="In-cluster Ray client address.")
    snippet = serializers.CharField(help_text="ray.init from a pod inside the cluster.")
    dashboard_proxy_url = serializers.CharField(
        help_text="The Ray dashboard through the control plane, for a signed-in browser."
    )
    api_proxy_url = serializers.CharField(
        help_text="The Ray dashboard's API through the control plane, for an API token "
        "(Ray's Jobs SDK: JobSubmissionClient(api_proxy_url, headers=...))."
    )
    port_forward = serializers.CharField(help_text="kubectl command forwarding 8265 and 10001.")
    jobs_snippet = serializers.CharField(help_text="Ray's Jobs SDK through the proxy.")
    port_forward_snippet = serializers.CharField(help_text="ray.init over the port-forward.")
    notebook_url = serializers.CharField(
        allow_null=True,
        help_text="JupyterLab on the head, for a signed-in browser of the owner or a tenant "
        "admin (null: the cluster was not requested with a notebook).",
    )


class ActivityOut(drf.Serializer):
    """A ready cluster's use, as last read from Ray (docs/idle.md)."""

    active = serializers.BooleanField(help_text="In use at the last reading.")
    last_active_at = serializers.DateTimeField(allow_null=True)
    idle_minutes = serializers.IntegerField(help_text="Minutes since it was last in use.")
    checked_at = serializers.DateTimeField(allow_null=True)
    note = serializers.CharField()
    idle_suspend_minutes = serializers.IntegerField(
        allow_null=True, help_text="The idle policy that applies to it (null: none)."
    )
    warned_at = serializers.DateTimeField(allow_null=True)
    suspend_at = serializers.DateTimeField(
        allow_null=True, help_text="When it will be suspended unless used or kept alive."
    )


class ClusterListItemOut(FlatModelOut):
    """A cluster request as the API's list returns it: what a list shows (state, queue,
    endpoints) and only the newest event; the history is on the detail (:class:`ClusterOut`).

    No queries: the selector (:func:`clusters.selectors.cluster_list_items`) prefetches.
    """

    owner = serializers.CharField(source="owner.username")
    flavor = serializers.CharField(source="flavor.name")
    kube_cluster = serializers.CharField(
        source="kube_cluster.name",
        allow_null=True,
        help_text="The Kubernetes cluster of the fleet it is placed on (null while it "
        "waits to be placed; a resumed request keeps the one it ran on, where admission "
        "places it again if it may).",
    )
    topology_level = serializers.CharField(
        help_text="The level of its flavor's topology its workers share (empty: none asked)."
    )
    topology_mode = serializers.CharField(
        help_text="required or preferred when it asked for a level (empty: none asked)."
    )
    topology_domain = serializers.CharField(
        help_text="The domain of topology_level its workers were pinned to at admission "
        "(the label's value on their nodes; empty: not admitted yet, or no single domain "
        "had room). A production cluster that asked no level may be packed into a domain "
        "of its flavor's finest level above hosts: its workers only prefer it."
    )
    tenant = serializers.CharField(source="tenant.slug")
    namespace = serializers.CharField(source="tenant.namespace")
    priority_class = serializers.SerializerMethodField(
        help_text="The platform priority class it runs in (null: none; it predates the "
        "classes, or there was no default class). docs/preemption.md."
    )
    gpus = serializers.DecimalField(
        max_digits=10,
        decimal_places=3,
        coerce_to_string=False,
        help_text="GPUs charged against the quota: the whole gang at its largest size "
        "(max_workers workers for an autoscaling cluster).",
    )
    flavors = serializers.SerializerMethodField(
        help_text="The GPU flavors it accepts, in order of preference; flavor is the "
        "first while it waits and the one it was admitted on once admitted."
    )
    image = serializers.SerializerMethodField(help_text="The Ray image of its pods.")
    ray_version = serializers.SerializerMethodField(
        help_text="The Ray version of the image, from its tag (null if the tag names none)."
    )
    env = serializers.DictField(
        child=serializers.CharField(), help_text="Environment variables of its Ray containers."
    )
    queue = serializers.SerializerMethodField()
    endpoints = serializers.SerializerMethodField()
    activity = serializers.SerializerMethodField()
    last_event = serializers.SerializerMethodField()
    stale = serializers.SerializerMethodField(
        help_text="Whether the Kubernetes cluster it runs on cannot be reached: its state "
        "is the last one read there (at stale_since), not necessarily its state now."
    )
    stale_since = serializers.SerializerMethodField(
        help_text="When its state was last read from its Kubernetes cluster, if stale."
    )

    class Meta:
        model = ClusterRequest
        fields = [
            "name",
            "tenant",
            "namespace",
            "kind",
            "flavor",
            "flavors",
            "kube_cluster",
            "topology_level",
            "topology_mode",
            "topology_domain",
            "workers",
            "min_workers",
            "max_workers",
            "gpu_fraction",
            "ttl_hours",
            "priority",
            "priority_class",
            "held_at",
            "hold_reason",
            "image",
            "ray_version",
            "env",
            "container_gpus",
            "notebook",
            "ssh",
            "gpus",
            "owner",
            "state",
            "state_reason",
            "last_error",
            "queue",
            "endpoints",
            "created_at",
            "admitted_at",
            "ready_at",
            "suspended_at",
            "expires_at",
            "deleted_at",
            "activity",
            "last_event",
            "stale",
            "stale_since",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_priority_class(self, obj: ClusterRequest) -> str | None:
        return obj.priority_class.name if obj.priority_class is not None else None

    @extend_schema_field(serializers.BooleanField())
    def get_stale(self, obj: ClusterRequest) -> bool:
        return staleness(obj)[0]

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_stale_since(self, obj: ClusterRequest) -> str | None:
        since = staleness(obj)[1]
        return None if since is None else serializers.DateTimeField().to_representation(since)

    @extend_schema_field(QueueOut(allow_null=True))
    def get_queue(self, obj: ClusterRequest) -> dict[str, Any] | None:
        found = waiting(obj)
        if found is None:
            return None
        return {
            "position": found.position,
            "flavor_position": found.flavor_position,
            "reason": found.reason,
            "message": found.message,
            "eta": found.eta,
            "flavors": obj.queue_flavors or [],
        }

    @extend_schema_field(serializers.CharField())
    def get_image(self, obj: ClusterRequest) -> str:
        return resolve_image(obj)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_ray_version(self, obj: ClusterRequest) -> str | None:
        return ray_version(resolve_image(obj))

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_flavors(self, obj: ClusterRequest) -> list[str]:
        return accepted_flavors(obj)

    @extend_schema_field(EndpointsOut(allow_null=True))
    def get_endpoints(self, obj: ClusterRequest) -> dict[str, Any] | None:
        request = self.context.get("request")
        base = request.build_absolute_uri("/").rstrip("/") if request is not None else ""
        return cluster_endpoints(obj, base_url=base)

    @extend_schema_field(ActivityOut(allow_null=True))
    def get_activity(self, obj: ClusterRequest) -> dict[str, Any] | None:
        return cluster_activity(obj)

    @cached_property
    def _event_out(self) -> ClusterEventOut:
        # One event serializer for every row: a ModelSerializer builds its fields on
        # first use, and building them again per row would weigh on every list.
        return ClusterEventOut()

    @extend_schema_field(ClusterEventOut(allow_null=True))
    def get_last_event(self, obj: ClusterRequest) -> dict[str, Any] | None:
        newest = getattr(obj, "latest_events", None)
        if newest is None:
            # Not from the list selector: a representation must not query per row.
            newest = getattr(obj, "recent_events", [])[:1]
        return self._event_out.to_representation(newest[0]) if newest else None


class GpuDeviceOut(drf.Serializer):
    """One device a worker pod's ResourceClaim was allocated (DRA flavors)."""

    pod = serializers.CharField()
    node = serializers.CharField()
    claim = serializers.CharField()
    driver = serializers.CharField()
    pool = serializers.CharField()
    device = serializers.CharField()
    product = serializers.CharField(allow_blank=True)
    mig_profile = serializers.CharField(allow_blank=True)
    uuid = serializers.CharField(allow_blank=True)


class GivenNoticeOut(drf.Serializer):
    """The preemption notice a running request was given."""

    at = serializers.DateTimeField()
    deadline = serializers.DateTimeField(
        allow_null=True, help_text="When it is stopped: a cluster suspended, a job requeued."
    )
    reason = serializers.CharField()


class CheckpointOut(drf.Serializer):
    """The last checkpoint its run reported."""

    uri = serializers.CharField()
    at = serializers.DateTimeField(allow_null=True)


class PreemptionOut(drf.Serializer):
    """Preemption without lost work (docs/preemption.md): the notice, the last
    checkpoint, how often it was preempted and what its next run resumes from."""

    notice = GivenNoticeOut(allow_null=True)
    checkpoint = CheckpointOut(allow_null=True)
    preemptions = serializers.IntegerField()
    resume_from = serializers.CharField(
        allow_blank=True, help_text="Its next run gets this as GANGWAY_RESUME_FROM."
    )


def preemption_of(obj: ClusterRequest) -> dict[str, Any]:
    """The request's preemption fields as :class:`PreemptionOut` shapes them."""
    notice = (
        {"at": obj.notice_at, "deadline": obj.reclaim_after, "reason": obj.notice_reason}
        if obj.notice_at
        else None
    )
    checkpoint = (
        {"uri": obj.checkpoint_uri, "at": obj.checkpointed_at} if obj.checkpoint_uri else None
    )
    return {
        "notice": notice,
        "checkpoint": checkpoint,
        "preemptions": obj.preemptions,
        "resume_from": obj.resume_from,
    }


class GpuSampleOut(drf.Serializer):
    """One reading of one GPU."""

    at = serializers.DateTimeField()
    utilization = serializers.IntegerField(help_text="DCGM_FI_DEV_GPU_UTIL, percent.")
    memory_used_mib = serializers.IntegerField(help_text="DCGM_FI_DEV_FB_USED, MiB.")


class WorkerGpuUtilizationOut(drf.Serializer):
    """One worker GPU's utilisation: the newest reading and the recent ones, oldest first."""

    pod = serializers.CharField()
    gpu_uuid = serializers.CharField()
    utilization = serializers.IntegerField()
    memory_used_mib = serializers.IntegerField()
    read_at = serializers.DateTimeField()
    samples = GpuSampleOut(many=True)


class ClusterOut(ClusterListItemOut):
    """A cluster request as its detail and the write actions return it: the list item's
    fields plus ``events``, its newest :data:`~clusters.selectors.EVENTS_SHOWN` events,
    oldest first (read by :func:`clusters.selectors.with_recent_events`; the whole
    history is the dashboard's), and on a DRA flavor's detail ``devices``, the GPU devices
    its workers were allocated (read live by the view: :mod:`clusters.live.gpu_devices`)."""

    events = serializers.SerializerMethodField()
    devices = serializers.SerializerMethodField(
        help_text="The GPU devices its workers' claims were allocated (DRA flavors, on the "
        "detail while it holds GPUs); null when not read or the read failed."
    )

    preemption = serializers.SerializerMethodField()
    gpu_utilization = serializers.SerializerMethodField(
        help_text="Its worker GPUs' utilisation over the last readings of the DCGM "
        "exporter, per pod and GPU (the detail of a request once admitted; null elsewhere)."
    )

    class Meta(ClusterListItemOut.Meta):
        fields = [
            *ClusterListItemOut.Meta.fields,
            "events",
            "devices",
            "preemption",
            "gpu_utilization",
        ]
        read_only_fields = fields

    @extend_schema_field(PreemptionOut)
    def get_preemption(self, obj: ClusterRequest) -> dict[str, Any]:
        return dict(PreemptionOut(preemption_of(obj)).data)

    @extend_schema_field(GpuDeviceOut(many=True, allow_null=True))
    def get_devices(self, obj: ClusterRequest) -> list[dict[str, Any]] | None:
        found = getattr(obj, "gpu_devices", None)
        return None if found is None else [GpuDeviceOut(d).data for d in found]

    @extend_schema_field(WorkerGpuUtilizationOut(many=True, allow_null=True))
    def get_gpu_utilization(self, obj: ClusterRequest) -> list[dict[str, Any]] | None:
        found = getattr(obj, "gpu_utilization", None)
        return None if found is None else [WorkerGpuUtilizationOut(g).data for g in found]

    @extend_schema_field(ClusterEventOut(many=True))
    def get_events(self, obj: ClusterRequest) -> list[dict[str, Any]]:
        newest_first = getattr(obj, "recent_events", [])
        return [self._event_out.to_representation(event) for event in newest_first[::-1]]


class UnattendedOut(ClusterOut):
    """The request's fields as a job or a service answers them: neither has a TTL nor is
    suspended, and neither is reached through the product's endpoints (a job through its
    logs, a service through its own endpoint)."""

    class Meta(ClusterOut.Meta):
        fields = [f for f in ClusterOut.Meta.fields if f not in ("ttl_hours", "suspended_at")]
        read_only_fields = fields

    @extend_schema_field(EndpointsOut(allow_null=True))
    def get_endpoints(self, obj: ClusterRequest) -> dict[str, Any] | None:
        return None
