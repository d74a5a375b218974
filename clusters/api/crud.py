"""The cluster request endpoints of the public contract: create, list, detail, delete,
suspend, resume and extend. Mixed into ``ClusterViewSet`` (clusters/api/views.py).

Views only translate HTTP to service calls: rules live in :mod:`clusters.requests.services` and
:mod:`clusters.domain.shapes`, so the dashboard enforces exactly the same ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from celery import current_app
from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from clusters import selectors
from clusters.api.serializers import ClusterCreateInput
from clusters.domain import shapes
from clusters.filters import ClusterFilter
from clusters.models import ClusterRequest
from clusters.output.request import ClusterListItemOut, ClusterOut
from clusters.requests import controls, services
from clusters.rows.spec import ClusterSpec
from controlplane.api.serializers import JsonIntegerField, StrictSerializer
from controlplane.api.viewsets import bodyless
from tenants.models import GpuFlavor, Role, Tenant


class ExtendIn(StrictSerializer):
    """Body of ``POST .../extend/``: the bounds of :func:`shapes.validate_extend_hours`."""

    hours = JsonIntegerField(
        min_value=shapes.MIN_HOURS,
        max_value=shapes.MAX_HOURS,
        # Every way of getting ``hours`` wrong reads as the one rule, in the dashboard too.
        error_messages={
            key: shapes.EXTEND_HOURS_MESSAGE
            for key in ("invalid", "min_value", "max_value", "max_string_length")
        },
    )

    def validate_hours(self, value: int) -> int:
        try:
            return shapes.validate_extend_hours(value)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict["hours"]) from exc


class ReasonIn(StrictSerializer):
    """Body of ``POST .../suspend/``, ``.../hold/`` and ``.../release/``: why, in words the
    owner reads in the request's timeline (optional for suspend and release)."""

    reason = serializers.CharField(
        required=False, allow_blank=True, max_length=controls.REASON_MAX, default=""
    )


class PriorityIn(StrictSerializer):
    """Body of ``POST .../priority/``: the new priority and why."""

    priority = JsonIntegerField(
        min_value=settings.CLUSTER_PRIORITY_MIN, max_value=settings.CLUSTER_PRIORITY_MAX
    )
    reason = serializers.CharField(max_length=controls.REASON_MAX)


class ClusterCrudMixin(mixins.ListModelMixin, mixins.RetrieveModelMixin):
    """List/detail reads plus the write actions, each a thin call into a service."""

    filterset_class = ClusterFilter
    ordering_fields = ["created_at", "state", "name"]
    if TYPE_CHECKING:  # provided by TenantScopedViewSet, which views.py mixes this into
        tenant: Tenant
        tenant_role: str | None
        flavor_read: GpuFlavor | None

        def get_object(self) -> ClusterRequest: ...

        def get_serializer_context(self) -> dict[str, Any]: ...

    crud_roles = {
        "list": Role.VIEWER,
        "retrieve": Role.VIEWER,
        "create": Role.ENGINEER,
        "destroy": Role.ENGINEER,
        "suspend": Role.ENGINEER,
        "resume": Role.ENGINEER,
        "extend": Role.ENGINEER,
        "keepalive": Role.ENGINEER,
        "priority": Role.ADMIN,
        "hold": Role.ADMIN,
        "release": Role.ADMIN,
    }

    def get_serializer_class(self) -> Any:
        # List items carry the newest event, the detail the recent history.
        return ClusterListItemOut if getattr(self, "action", None) == "list" else ClusterOut

    def _out(self, cluster: Any, code: int = status.HTTP_200_OK) -> Response:
        fresh = selectors.cluster_detail(tenant=self.tenant, pk=cluster.pk)
        out = ClusterOut(fresh, context=self.get_serializer_context())
        return Response(out.data, status=code)

    def _run(
        self,
        request: Request,
        control: Callable[..., ClusterRequest],
        body: type[StrictSerializer] | None = None,
    ) -> Response:
        """Run ``control`` on this cluster for the caller, with the fields of its ``body``
        (checked first: a 400 on bad input)."""
        fields: dict[str, Any] = {}
        if body is not None:
            parsed = body(data=request.data)
            parsed.is_valid(raise_exception=True)
            fields = dict(parsed.validated_data)
        cluster = control(
            actor=request.user, cluster=self.get_object(), role=self.tenant_role, **fields
        )
        return self._out(cluster)

    @extend_schema(request=ClusterCreateInput, responses={201: ClusterOut})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        context = {"tenant": self.tenant, "flavor_read": self.flavor_read}
        body = ClusterCreateInput(data=request.data, context=context)
        body.is_valid(raise_exception=True)
        cluster = services.cluster_request_create(
            actor=request.user,
            tenant=self.tenant,
            spec=ClusterSpec.from_data(body.validated_data),
            role=self.tenant_role,
        )
        return self._answer(cluster, status.HTTP_201_CREATED, events_known=True)

    def _answer(
        self, cluster: ClusterRequest, code: int, *, events_known: bool = False
    ) -> Response:
        """A create's or delete's answer: the row as the service left it (not read again),
        with its events (a create's service hands them back: ``events_known``). With Celery
        eager the commit's nudges may have moved the row: it is read again (:meth:`_out`)."""
        if current_app.conf.task_always_eager:
            return self._out(cluster, code)
        fresh = cluster if events_known else selectors.with_recent_events(cluster)
        return Response(ClusterOut(fresh, context=self.get_serializer_context()).data, code)

    @extend_schema(responses={202: ClusterOut})
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        cluster = services.cluster_delete(
            actor=request.user, cluster=self.get_object(), role=self.tenant_role
        )
        return self._answer(cluster, status.HTTP_202_ACCEPTED)

    @extend_schema(request=ReasonIn, responses=ClusterOut)
    @action(detail=True, methods=["post"])
    def suspend(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Suspend a running cluster; an optional ``reason`` goes into its timeline."""
        return self._run(
            request, lambda reason, **kw: services.cluster_suspend(why=reason, **kw), ReasonIn
        )

    @extend_schema(request=PriorityIn, responses=ClusterOut)
    @action(detail=True, methods=["post"])
    def priority(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Set a request's priority (tenant admins; higher goes first)."""
        return self._run(request, controls.cluster_set_priority, PriorityIn)

    @extend_schema(request=ReasonIn, responses=ClusterOut)
    @action(detail=True, methods=["post"])
    def hold(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Hold a queued request back until it is released (tenant admins)."""
        return self._run(request, controls.cluster_hold, ReasonIn)

    @extend_schema(request=ReasonIn, responses=ClusterOut)
    @action(detail=True, methods=["post"])
    def release(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Release a held request back into the queue (tenant admins)."""
        return self._run(request, controls.cluster_release, ReasonIn)

    @extend_schema(request=None, responses=ClusterOut)
    @action(detail=True, methods=["post"])
    @bodyless
    def resume(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self._run(request, services.cluster_resume)

    @extend_schema(request=None, responses=ClusterOut)
    @action(detail=True, methods=["post"])
    @bodyless
    def keepalive(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Count now as use of a ready cluster: its idle clock starts again and a pending
        idle warning is withdrawn (docs/idle.md)."""
        return self._run(request, services.cluster_keepalive)

    @extend_schema(request=ExtendIn, responses=ClusterOut)
    @action(detail=True, methods=["post"])
    def extend(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self._run(request, services.cluster_extend, ExtendIn)
