"""User accounts: platform admins list and create them and set their passwords; anyone
reads ``me`` and changes their own password."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractUser
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
)
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.api.throttles import WriteThrottle
from controlplane.api.viewsets import create_action
from tenants import selectors, services
from tenants.api import serializers as s
from tenants.api.permissions import PlatformAdminActions
from tenants.filters import (
    UserFilter,
)
from tenants.services import passwords


class UserViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[AbstractUser]):
    """User accounts: platform admins list and create them; anyone reads ``me``."""

    permission_classes = [permissions.IsAuthenticated, PlatformAdminActions]
    platform_admin_actions = frozenset({"list", "create", "set_password"})
    throttle_classes = [WriteThrottle]
    serializer_class = s.UserOutSerializer
    filterset_class = UserFilter
    ordering_fields = ["username", "date_joined"]

    def get_queryset(self) -> Any:
        return selectors.user_list()

    create = create_action(s.UserInSerializer, services.user_create, s.UserOutSerializer)

    @extend_schema(responses={200: s.MeSerializer})
    @action(detail=False, methods=["get"], pagination_class=None, filterset_class=None)
    def me(self, request: Request) -> Response:
        user = selectors.user_with_memberships(user=request.user)
        return Response(s.MeSerializer(user).data)

    @extend_schema(
        request=s.PasswordChangeInSerializer,
        responses={204: OpenApiResponse(description="Changed; your other sessions ended.")},
        description="Change your own password. A wrong old password, a new one the "
        "validators refuse, or an account that signs in through the identity provider "
        "(its password is the provider's) is a 400 naming the field. API tokens stay "
        "valid; dashboard sessions end.",
    )
    @action(detail=False, methods=["post"], pagination_class=None, filterset_class=None)
    def change_password(self, request: Request) -> Response:
        body = s.PasswordChangeInSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        passwords.password_change(user=request.user, **body.validated_data)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        request=s.UserPasswordInSerializer,
        responses={
            204: OpenApiResponse(description="The temporary password is set."),
            202: OpenApiResponse(description="The reset link is being mailed."),
        },
        description="Platform admins: set a user's temporary password (they must change "
        "it at the next sign-in; their sessions end and their API tokens are revoked) or "
        "mail them a reset link. An account that signs in through the identity provider "
        "is a 400.",
    )
    @action(detail=True, methods=["post"], pagination_class=None, filterset_class=None)
    def set_password(self, request: Request, username: str) -> Response:
        user = self.get_queryset().filter(username=username).first()
        if user is None:
            raise NotFound()
        body = s.UserPasswordInSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if body.validated_data["send_reset_link"]:
            passwords.password_reset_link_send(
                actor=request.user,
                user=user,
                protocol=request.scheme or "http",
                domain=request.get_host(),
            )
            return Response(status=status.HTTP_202_ACCEPTED)
        passwords.password_set_temporary(
            actor=request.user, user=user, password=body.validated_data["temporary_password"]
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
