"""``/api/v1/platform/kube-clusters/``: the fleet's Kubernetes clusters, for platform
admins only (anybody else is refused with 403). Secrets are write-only: an answer says
``has_token``, never the token. A save whose credentials fail the check is a 400 with
what failed (:mod:`clusters.members.checks`)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.core.exceptions import ValidationError
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from clusters.members import selectors, services
from clusters.members.stock import stock_set
from clusters.models import DrainMode, FlavorStock, KubeCluster, Schedulable
from controlplane.api import generics as drf
from controlplane.api.fields import SlugRowField
from controlplane.api.serializers import JsonIntegerField, StrictSerializer
from controlplane.api.throttles import WriteThrottle
from controlplane.api.viewsets import bodyless
from tenants.models import GpuFlavor, Tenant
from tenants.selectors import is_platform_admin, unknown_flavor_message


class PlatformAdminsOnly(permissions.BasePermission):
    """Platform admins only, reads included (a member's server and health are the
    platform's business)."""

    message = "Only platform admins manage the fleet's Kubernetes clusters."

    def has_permission(self, request: Request, view: Any) -> bool:
        return is_platform_admin(request.user)


class StockOut(drf.ModelSerializer):
    """A flavor's nodes in one member: listed by the admin and last observed."""

    flavor = serializers.CharField(source="flavor.name")

    class Meta:
        model = FlavorStock
        fields = [
            "flavor",
            "node_count",
            "max_node_count",
            "observed_nodes",
            "observed_free_nodes",
            "observed_free_gpus",
            "observed_at",
        ]
        read_only_fields = fields


class HealthOut(drf.Serializer):
    """What the last health probe or check saw."""

    reachable = serializers.BooleanField(allow_null=True)
    api_latency_ms = serializers.FloatField(allow_null=True)
    kubernetes_version = serializers.CharField()
    operators = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Operator name -> the custom resources of its API group the server serves.",
    )
    message = serializers.CharField(source="health_message")
    checked_at = serializers.DateTimeField(allow_null=True)
    last_sync_at = serializers.DateTimeField(allow_null=True)
    detect_seconds = serializers.FloatField(
        allow_null=True,
        help_text="Its last outage: from the first failed reconcile pass to its mark as "
        "unreachable.",
    )
    replace_seconds = serializers.FloatField(
        allow_null=True,
        help_text="The last time requests moved off it (a drain, an outage): from the "
        "drain's start or the outage's mark to the last of them admitted elsewhere.",
    )


class DrainOut(drf.Serializer):
    """How far a member's drain is: what still runs there, by what happens to it."""

    mode = serializers.ChoiceField(choices=DrainMode.choices)
    started_at = serializers.DateTimeField()
    drained = serializers.BooleanField(help_text="Nothing runs there any more.")
    drained_at = serializers.DateTimeField(allow_null=True)
    remaining = serializers.IntegerField(help_text="Workloads that still run there.")
    requeue = serializers.IntegerField(help_text="About to go back to the queue.")
    wait = serializers.IntegerField(help_text="Left to run to their end there.")
    deleting = serializers.IntegerField(help_text="Being deleted.")
    suspended = serializers.IntegerField(
        help_text="Suspended there: they hold nothing, and resume on another cluster."
    )
    awaiting_placement = serializers.IntegerField(
        help_text="Requests moved off it that wait to be placed again."
    )


class KubeClusterOut(drf.ModelSerializer):
    """A member of the fleet; its secrets only as whether it has them."""

    # A URL, or "" for the member that signs in with settings.KUBECONFIG.
    server = serializers.CharField(
        read_only=True, help_text="The API server's URL; empty for the settings' member."
    )
    has_token = serializers.SerializerMethodField()
    has_client_certificate = serializers.SerializerMethodField()
    allowed_tenants = drf.SlugRelatedField(slug_field="slug", many=True, read_only=True)
    health = HealthOut(source="*")
    stock = StockOut(many=True)
    drain = serializers.SerializerMethodField()

    class Meta:
        model = KubeCluster
        fields = [
            "name",
            "server",
            "ca_data",
            "insecure_skip_tls_verify",
            "has_token",
            "has_client_certificate",
            "from_settings",
            "region",
            "labels",
            "placement_order",
            "schedulable",
            "allowed_tenants",
            "credentials_changed_at",
            "created_at",
            "health",
            "stock",
            "drain",
        ]
        read_only_fields = fields

    @extend_schema_field(DrainOut(allow_null=True))
    def get_drain(self, obj: KubeCluster) -> dict[str, Any] | None:
        """The drain's progress (``drain_progress``, set by the view), while it drains."""
        progress = getattr(obj, "drain_progress", None)
        if progress is None:
            return None
        return DrainOut(
            {
                "mode": obj.drain_mode or DrainMode.DEFAULT,
                "started_at": obj.drain_started_at,
                "drained": obj.drained_at is not None,
                "drained_at": obj.drained_at,
                "remaining": progress.remaining,
                **asdict(progress),
            }
        ).data

    @extend_schema_field(serializers.BooleanField())
    def get_has_token(self, obj: KubeCluster) -> bool:
        return bool(obj.token_encrypted)

    @extend_schema_field(serializers.BooleanField())
    def get_has_client_certificate(self, obj: KubeCluster) -> bool:
        return bool(obj.client_certificate)


class KubeClusterUpdateIn(StrictSerializer):
    """What may change on a member; new credentials are checked before anything is saved."""

    server = serializers.URLField(max_length=500, required=False)
    ca_data = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    insecure_skip_tls_verify = serializers.BooleanField(required=False)
    token = serializers.CharField(
        required=False, write_only=True, help_text="A service account token (never returned)."
    )
    client_certificate = serializers.CharField(required=False, trim_whitespace=False)
    client_key = serializers.CharField(
        required=False,
        write_only=True,
        trim_whitespace=False,
        help_text="The client certificate's key, PEM (never returned).",
    )
    region = serializers.CharField(max_length=63, required=False, allow_blank=True)
    labels = serializers.DictField(child=serializers.CharField(max_length=63), required=False)
    placement_order = JsonIntegerField(min_value=0, max_value=100_000, required=False)
    allowed_tenants = SlugRowField(
        slug_field="slug",
        many=True,
        required=False,
        queryset=Tenant.objects.unscoped(),
        help_text="Slugs of the tenants that may use it; empty: every tenant.",
    )


class KubeClusterCreateIn(KubeClusterUpdateIn):
    """A Kubernetes cluster to register: where it is and a token, or a client
    certificate and key."""

    name = serializers.RegexField(
        r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$",
        help_text="A DNS label of at most 40 characters; fixed once registered.",
    )
    server = serializers.URLField(max_length=500)


class DrainIn(StrictSerializer):
    """How to drain a member."""

    mode = serializers.ChoiceField(
        choices=DrainMode.choices,
        default=DrainMode.DEFAULT,
        help_text="default: each kind its own way (interactive clusters and services are "
        "requeued, jobs run to their end); requeue: jobs are requeued too.",
    )


class CheckOut(drf.Serializer):
    """The outcome of checking a member's credentials now."""

    passed = serializers.BooleanField()
    message = serializers.CharField()
    cluster = KubeClusterOut()


def _with_progress(members: list[KubeCluster]) -> list[KubeCluster]:
    """``members``, each draining one with its ``drain_progress`` (one query for all)."""
    progress = selectors.drain_progress(members)
    for member in members:
        member.drain_progress = progress.get(member.pk)  # type: ignore[attr-defined]
    return members


class StockIn(StrictSerializer):
    """A flavor's nodes on the member; ``node_count`` null: it has none of them."""

    flavor = serializers.CharField(max_length=40)
    node_count = JsonIntegerField(min_value=0, max_value=100_000, allow_null=True)
    max_node_count = JsonIntegerField(
        min_value=0,
        max_value=100_000,
        allow_null=True,
        required=False,
        help_text="The most nodes its node group grows to; null or absent: it cannot grow.",
    )


REFUSED = OpenApiResponse(description="Invalid, or the credentials fail the check (why)")


class KubeClusterViewSet(viewsets.GenericViewSet[KubeCluster]):
    """The fleet's Kubernetes clusters: register, change, cordon, drain, check and remove."""

    permission_classes = [permissions.IsAuthenticated, PlatformAdminsOnly]
    throttle_classes = [WriteThrottle]
    serializer_class = KubeClusterOut
    lookup_field = "name"
    filter_backends: list[Any] = []

    def get_queryset(self) -> Any:
        return selectors.kube_cluster_list().prefetch_related("stock__flavor")

    def list(self, request: Request) -> Response:
        page = _with_progress(list(self.paginate_queryset(self.get_queryset()) or []))
        return self.get_paginated_response(KubeClusterOut(page, many=True).data)

    def retrieve(self, request: Request, name: str) -> Response:
        return Response(KubeClusterOut(_with_progress([self.get_object()])[0]).data)

    def _fresh(self, member: KubeCluster) -> Response:
        fresh = _with_progress([self.get_queryset().get(pk=member.pk)])[0]
        return Response(KubeClusterOut(fresh).data)

    @extend_schema(request=KubeClusterCreateIn, responses={201: KubeClusterOut, 400: REFUSED})
    def create(self, request: Request) -> Response:
        body = KubeClusterCreateIn(data=request.data)
        body.is_valid(raise_exception=True)
        member = services.kube_cluster_register(actor=request.user, **body.validated_data)
        response = self._fresh(member)
        response.status_code = status.HTTP_201_CREATED
        return response

    @extend_schema(request=KubeClusterUpdateIn, responses={200: KubeClusterOut, 400: REFUSED})
    def partial_update(self, request: Request, name: str) -> Response:
        member = self.get_object()
        body = KubeClusterUpdateIn(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        services.kube_cluster_update(actor=request.user, member=member, changes=body.validated_data)
        return self._fresh(member)

    @extend_schema(responses={204: None, 409: OpenApiResponse(description="Requests on it")})
    def destroy(self, request: Request, name: str) -> Response:
        services.kube_cluster_remove(actor=request.user, member=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    def _schedulable(self, request: Request, schedulable: str) -> Response:
        member = self.get_object()
        services.kube_cluster_set_schedulable(
            actor=request.user, member=member, schedulable=schedulable
        )
        return self._fresh(member)

    @extend_schema(request=None, responses={200: KubeClusterOut})
    @action(detail=True, methods=["post"])
    @bodyless
    def cordon(self, request: Request, name: str) -> Response:
        """No new placements on it; what runs there stays."""
        return self._schedulable(request, Schedulable.CORDONED)

    @extend_schema(request=None, responses={200: KubeClusterOut})
    @action(detail=True, methods=["post"])
    @bodyless
    def uncordon(self, request: Request, name: str) -> Response:
        """Placements on it again."""
        return self._schedulable(request, Schedulable.ACTIVE)

    @extend_schema(request=DrainIn, responses={200: KubeClusterOut, 400: REFUSED})
    @action(detail=True, methods=["post"])
    def drain(self, request: Request, name: str) -> Response:
        """No new placements on it, and what runs there is moved or waited for, each kind
        its own way (or every kind requeued); its owners are told. Uncordon or cordon
        ends the drain."""
        member = self.get_object()
        body = DrainIn(data=request.data)
        body.is_valid(raise_exception=True)
        services.kube_cluster_drain(
            actor=request.user, member=member, mode=body.validated_data["mode"]
        )
        return self._fresh(member)

    @extend_schema(request=None, responses={200: CheckOut})
    @action(detail=True, methods=["post"])
    @bodyless
    def check(self, request: Request, name: str) -> Response:
        """Check its credentials now (version, custom resources, access reviews) and
        record what was seen as its health."""
        member = self.get_object()
        report = services.kube_cluster_check(actor=request.user, member=member)
        cluster = KubeClusterOut(_with_progress([self.get_queryset().get(pk=member.pk)])[0]).data
        return Response({"passed": report.passed, "message": report.message, "cluster": cluster})

    @extend_schema(request=StockIn, responses={200: KubeClusterOut, 400: REFUSED})
    @action(detail=True, methods=["put"])
    def stock(self, request: Request, name: str) -> Response:
        """List a flavor's nodes on it; the flavor's totals become the sums over the
        members (clusters.members.stock)."""
        member = self.get_object()
        body = StockIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        flavor = GpuFlavor.objects.filter(name=data["flavor"]).first()
        if flavor is None:
            raise ValidationError({"flavor": [unknown_flavor_message(data["flavor"])]})
        stock_set(
            actor=request.user,
            member=member,
            flavor=flavor,
            node_count=data["node_count"],
            max_node_count=data.get("max_node_count"),
        )
        return self._fresh(member)
