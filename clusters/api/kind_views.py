"""What the API of every kind but the cluster shares: a tenant's rows of one kind,
looked up by name, read back after a write with the kind's output serializer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from celery import current_app
from django.conf import settings
from django.db.models import prefetch_related_objects
from rest_framework import mixins, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from clusters import selectors
from clusters.domain.shapes import DNS_LABEL_PATTERN
from clusters.domain.workload_kinds import Kind
from clusters.filters import ClusterFilter
from clusters.models import ClusterRequest
from tenants.api.viewsets import TenantScopedViewSet
from tenants.models import Tenant


class KindViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet[ClusterRequest]
):
    """One kind's rows of one tenant (``kind``), shown with ``serializer_class``."""

    kind: ClassVar[Kind]
    # The kind's create body (also its dry-run's): a cluster request's shape and its own fields.
    create_input: ClassVar[type[BaseSerializer[Any]]]
    queryset = ClusterRequest.objects.none()  # for the OpenAPI schema only
    lookup_field = "name"
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

    def _parsed(
        self, request: Request, split: Callable[[dict[str, Any]], Any], *, dry_run: bool = False
    ) -> Any:
        """The create body checked by :attr:`create_input` and ``split`` into what the
        kind's service takes (a 400 on bad input); a dry-run also checks KAI's terms."""
        context: dict[str, Any] = {"tenant": self.tenant}
        if dry_run:
            context["kai_enabled"] = settings.KAI_ENABLED
        body = self.create_input(data=request.data, context=context)
        body.is_valid(raise_exception=True)
        return split(dict(body.validated_data))
