"""A tenant's members: every member lists them, the tenant's admins manage them."""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
)
from rest_framework import mixins, status
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.api.viewsets import create_action
from tenants import selectors, services
from tenants.api import serializers as s
from tenants.api.viewsets import TenantScopedViewSet
from tenants.filters import (
    MembershipFilter,
)
from tenants.models import Membership, Role, Tenant


class MemberViewSet(mixins.ListModelMixin, TenantScopedViewSet[Membership]):
    """A tenant's members: every member lists them, tenant admins add and remove."""

    action_roles: ClassVar[dict[str, str]] = {
        "list": Role.VIEWER,
        "create": Role.ADMIN,
        "partial_update": Role.ADMIN,
        "destroy": Role.ADMIN,
    }
    serializer_class = s.MemberOutSerializer
    filterset_class = MembershipFilter
    ordering_fields = ["created_at", "role"]
    lookup_field = "user__username"
    lookup_url_kwarg = "username"
    queryset = Membership.objects.none()  # for the schema; requests use scoped_queryset

    def scoped_queryset(self, tenant: Tenant) -> Any:
        return selectors.membership_list(tenant=tenant)

    create = create_action(
        s.MemberInSerializer, services.membership_add, s.MemberOutSerializer, from_view=("tenant",)
    )

    @extend_schema(
        request=s.MemberRoleSerializer,
        responses={200: s.MemberOutSerializer, 409: OpenApiResponse(description="Last admin")},
    )
    def partial_update(self, request: Request, tenant_slug: str, username: str) -> Response:
        """Change a member's role (never to or from a role above your own; never the
        last admin away from admin)."""
        membership = self.get_object()  # an unknown member is a 404 before the body
        body = s.MemberRoleSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        membership = services.membership_set_role(
            actor=request.user, membership=membership, role=body.validated_data["role"]
        )
        return Response(s.MemberOutSerializer(membership).data)

    @extend_schema(responses={204: None, 409: OpenApiResponse(description="Last admin")})
    def destroy(self, request: Request, tenant_slug: str, username: str) -> Response:
        services.membership_remove(actor=request.user, membership=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)
