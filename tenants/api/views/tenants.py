"""Tenants (platform admins create and change them) and each tenant's policy (its own
admins change how their engineers share it)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import (
    extend_schema,
)
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.api.throttles import WriteThrottle
from tenants import selectors, services
from tenants.api import serializers as s
from tenants.api.permissions import PlatformAdminWrites
from tenants.api.viewsets import TenantScopedViewSet
from tenants.filters import (
    TenantFilter,
)
from tenants.models import Role, Tenant


@contextmanager
def _policy_errors() -> Iterator[None]:
    """Name policy fields as the API spells them (``policy.dev_ttl_hours``): the
    services know the tenant's flat fields, the API nests the policy."""
    try:
        yield
    except DjangoValidationError as exc:
        if not hasattr(exc, "error_dict"):
            raise
        raise DjangoValidationError(
            {
                (f"policy.{key}" if key in services.POLICY_FIELDS else key): errors
                for key, errors in exc.error_dict.items()
            }
        ) from exc


class TenantViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[Tenant]):
    """Tenants: members read their own, platform admins read all, create and change."""

    permission_classes = [permissions.IsAuthenticated, PlatformAdminWrites]
    throttle_classes = [WriteThrottle]
    serializer_class = s.TenantOutSerializer
    filterset_class = TenantFilter
    ordering_fields = ["slug", "name", "created_at"]
    lookup_field = "slug"
    queryset = Tenant.objects.none()  # for the schema; requests use get_queryset

    def get_queryset(self) -> Any:
        return selectors.tenant_list(user=self.request.user)

    def retrieve(self, request: Request, slug: str) -> Response:
        return Response(s.TenantOutSerializer(self.get_object()).data)

    @extend_schema(request=s.TenantWriteSerializer, responses={201: s.TenantOutSerializer})
    def create(self, request: Request) -> Response:
        body = s.TenantWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.flat()
        with _policy_errors():
            tenant = services.tenant_create(
                actor=request.user,
                slug=data.pop("slug"),
                name=data.pop("name"),
                namespace=data.pop("namespace", ""),
                fields=data,
            )
        return Response(s.TenantOutSerializer(tenant).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.TenantWriteSerializer, responses={200: s.TenantOutSerializer})
    def partial_update(self, request: Request, slug: str) -> Response:
        tenant = self.get_object()
        body = s.TenantWriteSerializer(tenant, data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        with _policy_errors():
            tenant = services.tenant_update(actor=request.user, tenant=tenant, changes=body.flat())
        return Response(s.TenantOutSerializer(tenant).data)


class PolicyViewSet(TenantScopedViewSet[Tenant]):
    """A tenant's policy: members read it; its admins change how their engineers share
    it (per-engineer caps, the default dev TTL within the platform's maximum, the idle
    policy). Platform admins change the rest through ``PATCH /tenants/{slug}/``."""

    action_roles: ClassVar[dict[str, str]] = {
        "retrieve": Role.VIEWER,
        "partial_update": Role.ADMIN,
    }
    serializer_class = s.PolicyOutSerializer
    pagination_class = None
    filter_backends = []
    queryset = Tenant.objects.none()  # for the schema; requests use the scoped tenant

    def scoped_queryset(self, tenant: Tenant) -> Any:
        return Tenant.objects.filter(pk=tenant.pk)

    @extend_schema(responses={200: s.PolicyOutSerializer})
    def retrieve(self, request: Request, tenant_slug: str) -> Response:
        return Response(s.PolicyOutSerializer(self.tenant).data)

    @extend_schema(request=s.TenantAdminPolicySerializer, responses={200: s.PolicyOutSerializer})
    def partial_update(self, request: Request, tenant_slug: str) -> Response:
        body = s.TenantAdminPolicySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        tenant = services.tenant_policy_update(
            actor=request.user, tenant=self.tenant, changes=dict(body.validated_data)
        )
        return Response(s.PolicyOutSerializer(tenant).data)
