"""A service's endpoint access under ``/api/v1/tenants/{slug}/services/{name}/``:
``tokens/`` (list, create: the secret shown once), ``tokens/{id}/`` (revoke) and
``public/`` (a tenant admin's switch). Mixed into the services' viewset; the rules are
``endpoint_access.py``'s."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from clusters.kinds.rayservice import endpoint_access
from clusters.models import ServiceToken
from controlplane.api import generics as drf
from controlplane.api.serializers import StrictSerializer


class ServiceTokenIn(StrictSerializer):
    """Body of ``POST .../tokens/``: a name saying who will use the token."""

    name = serializers.CharField(max_length=64)


class ServiceTokenOut(drf.Serializer):
    """An invoke token as listed (never its secret)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The token's first characters.")
    created_by = serializers.CharField(source="created_by.username", default="", allow_null=True)
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)


class ServiceTokenCreatedOut(ServiceTokenOut):
    """A new invoke token, with its secret: shown this once, stored only hashed."""

    token = serializers.CharField(help_text="The secret: 'Authorization: Bearer <token>'.")


class ServiceTokenListOut(drf.Serializer):
    """A page of a service's invoke tokens."""

    count = serializers.IntegerField()
    next = serializers.CharField(allow_null=True)
    previous = serializers.CharField(allow_null=True)
    results = ServiceTokenOut(many=True)


class PublicIn(StrictSerializer):
    """Body of ``POST .../public/``."""

    public = serializers.BooleanField()


class PublicOut(drf.Serializer):
    """Whether the service's endpoint answers without a token."""

    public = serializers.BooleanField()


class ServiceEndpointActions:
    """The endpoint's access routes of the services' viewset (see the module)."""

    get_object: Any
    tenant_role: Any
    paginate_queryset: Any
    get_paginated_response: Any

    @extend_schema(
        methods=["GET"], responses=ServiceTokenListOut, operation_id="services_tokens_list"
    )
    @extend_schema(
        methods=["POST"],
        request=ServiceTokenIn,
        responses={201: ServiceTokenCreatedOut},
        operation_id="services_tokens_create",
    )
    @action(detail=True, methods=["get", "post"], url_path="tokens")
    def tokens(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The service's invoke tokens; POST creates one (its secret shown once)."""
        row = self.get_object()
        if request.method != "POST":  # GET, and HEAD with it
            page = self.paginate_queryset(endpoint_access.service_tokens(request=row))
            listed: Response = self.get_paginated_response(ServiceTokenOut(page, many=True).data)
            return listed
        body = ServiceTokenIn(data=request.data)
        body.is_valid(raise_exception=True)
        token, secret = endpoint_access.service_token_create(
            actor=request.user, request=row, name=body.validated_data["name"], role=self.tenant_role
        )
        out = {**ServiceTokenOut(token).data, "token": secret}
        return Response(out, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={204: None})
    @action(detail=True, methods=["delete"], url_path=r"tokens/(?P<token_id>[0-9]{1,18})")
    def token_revoke(self, request: Request, *args: Any, token_id: str, **kwargs: Any) -> Response:
        """Revoke one invoke token of the service."""
        row = self.get_object()
        try:
            endpoint_access.service_token_revoke(
                actor=request.user, request=row, token_id=int(token_id), role=self.tenant_role
            )
        except ServiceToken.DoesNotExist:
            raise NotFound(f"{row.name} has no token {token_id}.") from None
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=PublicIn, responses=PublicOut)
    @action(detail=True, methods=["post"], url_path="public")
    def public(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Make the service's endpoint public (no token) or private (a tenant admin)."""
        body = PublicIn(data=request.data)
        body.is_valid(raise_exception=True)
        details = endpoint_access.service_public_set(
            actor=request.user,
            request=self.get_object(),
            public=body.validated_data["public"],
            role=self.tenant_role,
        )
        return Response({"public": details.public})
