"""A tenant's quota as one document: members read it, platform admins replace it."""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.utils import (
    extend_schema,
)
from rest_framework.request import Request
from rest_framework.response import Response

from tenants import selectors, services
from tenants.api import serializers as s
from tenants.api.permissions import PlatformAdminActions
from tenants.api.viewsets import TenantScopedViewSet
from tenants.models import Quota, Role, Tenant


class QuotaViewSet(TenantScopedViewSet[Quota]):
    """A tenant's quota as one document: members read it, platform admins replace it."""

    action_roles: ClassVar[dict[str, str]] = {"retrieve": Role.VIEWER, "update": Role.ADMIN}
    permission_classes = [*TenantScopedViewSet.permission_classes, PlatformAdminActions]
    platform_admin_actions = frozenset({"update"})
    serializer_class = s.QuotaSetSerializer
    pagination_class = None
    filter_backends = []
    queryset = Quota.objects.none()  # for the schema; requests use scoped_queryset

    def scoped_queryset(self, tenant: Tenant) -> Any:
        return selectors.quota_list(tenant=tenant)

    def _document(self, tenant: Tenant) -> dict[str, Any]:
        lines = [
            {
                "flavor": q.flavor.name,
                "gpus": q.gpus,
                "borrow_limit": q.borrow_limit,
                "lend_limit": q.lend_limit,
            }
            for q in self.scoped_queryset(tenant)
        ]
        return {"flavors": lines, "cpu": tenant.cpu_quota, "memory_gib": tenant.memory_quota_gib}

    @extend_schema(responses={200: s.QuotaSetSerializer})
    def retrieve(self, request: Request, tenant_slug: str) -> Response:
        return Response(s.QuotaSetSerializer(self._document(self.tenant)).data)

    @extend_schema(request=s.QuotaSetSerializer, responses={200: s.QuotaSetSerializer})
    def update(self, request: Request, tenant_slug: str) -> Response:
        body = s.QuotaSetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        tenant = services.quota_set(
            actor=request.user,
            tenant=self.tenant,
            flavors=[services.QuotaLine(**line) for line in data["flavors"]],
            cpu=data["cpu"],
            memory_gib=data["memory_gib"],
        )
        return Response(s.QuotaSetSerializer(self._document(tenant)).data)
