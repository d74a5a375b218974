"""Sign-in endpoints: a token for a password, the caller's own tokens, and how to sign
in with single sign-on. Responses that carry credentials are never cached."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import authenticate
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
)
from knox.models import AuthToken
from rest_framework import permissions, status, viewsets
from rest_framework.exceptions import PermissionDenied, Throttled, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api.authentication import TokenAuthentication
from controlplane.api.throttles import AuthThrottle, WriteThrottle
from tenants import lockout, selectors, services
from tenants.api import serializers as s
from tenants.services import passwords
from tenants.sso import provider as sso_provider


class NoStore(APIView):
    """Responses that carry or describe credentials: no cache, browser or proxy, may
    keep them (errors included, since they answer a credential too). Put it before the
    view class it applies to."""

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Cache-Control"] = "no-store"
        response["Pragma"] = "no-cache"  # HTTP/1.0 caches
        return response


class TokenView(NoStore, APIView):
    """``POST`` exchanges a username and password for a token; ``DELETE`` revokes the
    token that authenticates the request."""

    def get_authenticators(self) -> list[Any]:
        # A login must not be refused because of a stale session or header; a revoke
        # must name the token it revokes, so only token authentication applies.
        if self._method() == "DELETE":
            return [TokenAuthentication()]
        return []

    def _method(self) -> str:
        # The schema generator builds this view without a request.
        return getattr(self.request, "method", "") or ""

    def get_permissions(self) -> list[Any]:
        if self._method() == "DELETE":
            return [permissions.IsAuthenticated()]
        return [permissions.AllowAny()]

    def get_throttles(self) -> list[Any]:
        return [AuthThrottle()] if self._method() == "POST" else []

    @extend_schema(
        request=s.TokenInSerializer,
        responses={
            200: s.TokenOutSerializer,
            403: OpenApiResponse(
                description="The password is a temporary one an admin set: choose your own "
                "on the dashboard first."
            ),
            429: OpenApiResponse(
                description="Too many attempts from this address, or too many failed "
                "sign-ins for this username or address; see Retry-After."
            ),
        },
        auth=[],
        summary="Obtain an API token",
    )
    def post(self, request: Request) -> Response:
        body = s.TokenInSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        username = body.validated_data["username"]
        user = authenticate(
            request._request, username=username, password=body.validated_data["password"]
        )
        if user is None:
            # Locked out (before this attempt, or by it): say so, with when to retry.
            locked = lockout.lockout_for(request._request, username)
            if locked is not None:
                raise Throttled(wait=locked.seconds, detail=locked.message)
            raise ValidationError(
                {"non_field_errors": ["Unable to log in with those credentials."]}
            )
        if passwords.must_change_password(user):
            # A temporary password opens the dashboard's change page and nothing else: a
            # token would let its holder skip the change the admin asked for.
            raise PermissionDenied(passwords.must_change_message(user))
        instance, key = services.token_issue(user=user)
        out = {"token": key, "expiry": instance.expiry, "username": user.get_username()}
        return Response(s.TokenOutSerializer(out).data)

    @extend_schema(request=None, responses={204: None}, summary="Revoke the token used")
    def delete(self, request: Request) -> Response:
        services.token_revoke(token=request.auth)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SsoConfigView(APIView):
    """``GET``: whether single sign-on is on and, if so, where a command line signs in
    (the device authorization grant of the provider's public client). Open to anyone:
    it names only public endpoints."""

    permission_classes = [permissions.AllowAny]

    def get_authenticators(self) -> list[Any]:
        return []  # a stale session or header must not stand between a client and this

    @extend_schema(responses={200: s.SsoConfigSerializer}, summary="How to sign in with SSO")
    def get(self, request: Request) -> Response:
        if not sso_provider.enabled():
            return Response({"enabled": False})
        body: dict[str, Any] = {
            "enabled": True,
            "issuer": settings.OIDC_ISSUER,
            "provider_name": settings.OIDC_PROVIDER_NAME,
            "client_id": settings.OIDC_CLI_CLIENT_ID or None,
            "device_authorization_endpoint": None,
            "token_endpoint": None,
            "revocation_endpoint": None,
            "scope": settings.OIDC_CLI_SCOPES,
        }
        try:
            meta = sso_provider.metadata()
        except sso_provider.ProviderUnavailable:
            return Response(body)  # the client says the provider cannot be reached
        if settings.OIDC_CLI_CLIENT_ID:
            body["device_authorization_endpoint"] = meta.get("device_authorization_endpoint")
            body["token_endpoint"] = meta.get("token_endpoint")
            body["revocation_endpoint"] = meta.get("revocation_endpoint")
        return Response(body)


class TokenViewSet(NoStore, viewsets.GenericViewSet[AuthToken]):
    """The caller's own API tokens: list them (never the key), revoke one by its id or
    all of them. Another user's token is a 404."""

    permission_classes = [permissions.IsAuthenticated]
    throttle_classes = [WriteThrottle]
    serializer_class = s.TokenItemSerializer
    filter_backends = []
    queryset = AuthToken.objects.none()  # for the schema; requests use get_queryset

    def get_queryset(self) -> Any:
        return selectors.token_list(user=self.request.user)

    @extend_schema(summary="List your API tokens", operation_id="auth_tokens_list")
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset()) or []
        current = getattr(request.auth, "digest", None)
        items = [
            {
                "id": token.digest[:16],
                "token_key": token.token_key,
                "created": token.created,
                "expiry": token.expiry,
                "current": token.digest == current,
            }
            for token in page
        ]
        return self.get_paginated_response(s.TokenItemSerializer(items, many=True).data)

    @extend_schema(
        summary="Revoke one of your API tokens",
        operation_id="auth_tokens_revoke",
        parameters=[
            OpenApiParameter(
                "token_id",
                str,
                OpenApiParameter.PATH,
                description="The token's `id`, as listed (16 hexadecimal digits).",
            )
        ],
        responses={204: None, 404: OpenApiResponse(description="No such token of yours")},
    )
    def destroy(self, request: Request, token_id: str) -> Response:
        token = selectors.token_get(user=request.user, token_id=token_id)
        services.token_revoke(token=token)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Revoke all your API tokens",
        operation_id="auth_tokens_revoke_all",
        request=None,
        responses={200: s.TokensRevokedSerializer},
    )
    def revoke_all(self, request: Request) -> Response:
        revoked = services.token_revoke_all(user=request.user)
        return Response(s.TokensRevokedSerializer({"revoked": revoked}).data)
