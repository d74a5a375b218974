"""What the API of every kind but the cluster shares: a tenant's rows of one kind,
looked up by name; create, delete and dry-run written once, each kind filling
:class:`KindWrites` with its services; rows read back with the kind's output serializer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from celery import current_app
from django.conf import settings
from django.db.models import prefetch_related_objects
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from clusters import selectors
from clusters.api.renderers import MANIFEST_RENDERERS, manifest_responses
from clusters.api.serializers import DryRunOutput
from clusters.domain.shapes import DNS_LABEL_PATTERN
from clusters.domain.workload_kinds import Kind
from clusters.filters import ClusterFilter
from clusters.models import ClusterRequest
from controlplane.api.schema import AutoSchema
from tenants.api.viewsets import TenantScopedViewSet
from tenants.models import Role, Tenant


@dataclass(frozen=True)
class KindWrites:
    """The services behind a kind's create, delete and dry-run. ``split`` turns the
    checked create body into the keyword arguments (``spec`` and the kind's own) that
    ``create`` and ``dry_run`` take beside the actor, tenant and role."""

    split: Callable[[dict[str, Any]], dict[str, Any]]
    create: Callable[..., ClusterRequest]
    delete: Callable[..., ClusterRequest]
    dry_run: Callable[..., dict[str, Any]]


KIND_ROLES: dict[str, str] = {
    "list": Role.VIEWER,
    "retrieve": Role.VIEWER,
    "create": Role.ENGINEER,
    "destroy": Role.ENGINEER,
    "dry_run": Role.ENGINEER,
}


class KindSchema(AutoSchema):
    """Documents the shared create, delete and dry-run with the kind's own create body
    (:attr:`KindViewSet.create_input`) and row (``serializer_class``)."""

    @property
    def _kind_view(self) -> KindViewSet:
        return cast(KindViewSet, self.view)

    def get_request_serializer(self) -> Any:
        if self._kind_view.action in ("create", "dry_run"):
            return self._kind_view.create_input
        return super().get_request_serializer()

    def get_response_serializers(self) -> Any:
        codes = {"create": status.HTTP_201_CREATED, "destroy": status.HTTP_202_ACCEPTED}
        if self._kind_view.action in codes:
            return {codes[self._kind_view.action]: self._kind_view.serializer_class}
        return super().get_response_serializers()

    def get_description(self) -> str:  # type: ignore[override]  # drf-spectacular's signature
        if self._kind_view.action == "dry_run":
            noun = self._kind_view.kind.noun
            return (
                f"Would this {noun} start now, queue (where, until when) or never fit? "
                "Writes nothing."
            )
        return str(super().get_description())


class KindViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet[ClusterRequest]
):
    """One kind's rows of one tenant (``kind``), shown with ``serializer_class``."""

    kind: ClassVar[Kind]
    # The kind's create body (also its dry-run's): a cluster request's shape and its own fields.
    create_input: ClassVar[type[BaseSerializer[Any]]]
    writes: ClassVar[KindWrites]
    # The shared actions' least roles; a kind adds its own actions' (``{**KIND_ROLES, ...}``).
    action_roles = KIND_ROLES
    schema = KindSchema()
    queryset = ClusterRequest.objects.none()  # for the OpenAPI schema only
    lookup_field = "name"
    reads_flavor_for = ("create", "dry_run")
    lookup_value_regex = DNS_LABEL_PATTERN
    filterset_class = ClusterFilter
    ordering_fields = ["created_at", "state", "name"]

    def scoped_queryset(self, tenant: Tenant) -> Any:
        if self.action == "list":
            queryset = selectors.cluster_list_items(tenant=tenant, workload=self.kind.workload)
        else:
            queryset = selectors.cluster_list(tenant=tenant, workload=self.kind.workload)
        return queryset.not_deleted()

    def get_object(self) -> ClusterRequest:
        row: ClusterRequest = super().get_object()
        if self.action == "retrieve":
            # Its history by a plain ORDER BY ... LIMIT (see ClusterViewSet.get_object).
            selectors.with_recent_events(row)
        return row

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        created = self.writes.create(
            actor=request.user, tenant=self.tenant, role=self.tenant_role, **self._parsed(request)
        )
        return self._answer_created(created)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        row = self.writes.delete(
            actor=request.user, request=self.get_object(), role=self.tenant_role
        )
        return self._out(row, status.HTTP_202_ACCEPTED)

    @extend_schema(responses=manifest_responses(DryRunOutput))
    @action(detail=False, methods=["post"], url_path="dry-run", renderer_classes=MANIFEST_RENDERERS)
    def dry_run(self, request: Request, tenant_slug: str) -> Response:
        result = self.writes.dry_run(
            tenant=self.tenant,
            owner=request.user,
            role=self.tenant_role,
            **self._parsed(request, dry_run=True),
        )
        return Response(result, status=status.HTTP_200_OK)

    def _output(self, row: ClusterRequest) -> BaseSerializer[Any]:
        serializer: BaseSerializer[Any] = self.get_serializer_class()(row)
        return serializer

    def _out(self, row: ClusterRequest, code: int = status.HTTP_200_OK) -> Response:
        fresh = selectors.cluster_detail(tenant=self.tenant, pk=row.pk, workload=self.kind.workload)
        return Response(self._output(fresh).data, status=code)

    def _answer_created(self, row: ClusterRequest) -> Response:
        """A create's answer: the row as the service saved it, with its details; only its
        events and usage spans are read. Celery eager: read again (:meth:`_out`)."""
        if current_app.conf.task_always_eager:
            return self._out(row, status.HTTP_201_CREATED)
        selectors.with_recent_events(row)
        prefetch_related_objects([row], "usage_spans")
        return Response(self._output(row).data, status=status.HTTP_201_CREATED)

    def _parsed(self, request: Request, *, dry_run: bool = False) -> dict[str, Any]:
        """The create body checked by :attr:`create_input` and split into the keyword
        arguments of the kind's services (a 400 on bad input); a dry-run also checks
        KAI's terms."""
        context: dict[str, Any] = {"tenant": self.tenant, "flavor_read": self.flavor_read}
        if dry_run:
            context["kai_enabled"] = settings.KAI_ENABLED
        body = self.create_input(data=request.data, context=context)
        body.is_valid(raise_exception=True)
        return self.writes.split(dict(body.validated_data))
