"""The audit trail, read-only, filtered by what the caller may see."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, permissions, viewsets

from tenants import selectors
from tenants.api import serializers as s
from tenants.filters import (
    AuditEventFilter,
)
from tenants.models import AuditEvent


@extend_schema_view(
    list=extend_schema(
        description="Platform admins see every event, tenant admins their tenants' "
        "events; engineers and viewers get an empty list."
    )
)
class AuditEventViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[AuditEvent]):
    """The audit trail, read-only, filtered by what the caller may see."""

    permission_classes = [permissions.IsAuthenticated]
    serializer_class = s.AuditEventSerializer
    filterset_class = AuditEventFilter
    ordering_fields = ["at"]
    queryset = AuditEvent.objects.none()  # for the schema; requests use get_queryset

    def get_queryset(self) -> Any:
        return selectors.audit_list(user=self.request.user)
