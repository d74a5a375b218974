"""REST views of the tenants app: thin adapters from HTTP to selectors and services.

Each view resolves what it acts on through a scoped selector (so an invisible object
is a 404), validates the body's shape with an input serializer, calls one service and
renders the result with an output serializer. Access rules live in the services; the
permission classes here only answer early, with the right status, before a body is
even parsed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, cast

from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth.models import AbstractUser
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from knox.models import AuthToken
from rest_framework import permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, Throttled, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api.authentication import TokenAuthentication
from controlplane.api.throttles import AuthThrottle, WriteThrottle
from tenants import lockout, passwords, selectors, services
from tenants.api import serializers as s
from tenants.api.viewsets import TenantScopedViewSet
from tenants.filters import (
    AuditEventFilter,
    FlavorFilter,
    MembershipFilter,
    TenantFilter,
    UserFilter,
)
from tenants.models import AuditEvent, Cohort, GpuFlavor, Membership, Quota, Role, Tenant
from tenants.sso import provider as sso_provider


class PlatformAdminWrites(permissions.BasePermission):
    """Reads for every authenticated user, writes for platform admins.

    Writes on one object are decided after the object was found in the caller's
    visible queryset, so that an invisible object is a 404 rather than a 403.
    """

    message = "Only platform admins may change this."

    def has_permission(self, request: Request, view: Any) -> bool:
        on_one_object = (view.lookup_url_kwarg or view.lookup_field) in view.kwargs
        if request.method in permissions.SAFE_METHODS or on_one_object:
            return True
        return selectors.is_platform_admin(request.user)

    def has_object_permission(self, request: Request, view: Any, obj: Any) -> bool:
        return request.method in permissions.SAFE_METHODS or selectors.is_platform_admin(
            request.user
        )


class PlatformAdminActions(permissions.BasePermission):
    """Actions named in ``view.platform_admin_actions`` need a platform admin."""

    message = "Only platform admins may do this."

    def has_permission(self, request: Request, view: Any) -> bool:
        if view.action in getattr(view, "platform_admin_actions", ()):
            return selectors.is_platform_admin(request.user)
        return True


# --- Auth ---------------------------------------------------------------------------


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


# --- Users --------------------------------------------------------------------------


class UserViewSet(viewsets.GenericViewSet[AbstractUser]):
    """User accounts: platform admins list and create them; anyone reads ``me``."""

    permission_classes = [permissions.IsAuthenticated, PlatformAdminActions]
    platform_admin_actions = frozenset({"list", "create", "set_password"})
    throttle_classes = [WriteThrottle]
    serializer_class = s.UserOutSerializer
    filterset_class = UserFilter
    ordering_fields = ["username", "date_joined"]

    def get_queryset(self) -> Any:
        return selectors.user_list()

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(s.UserOutSerializer(page, many=True).data)

    @extend_schema(request=s.UserInSerializer, responses={201: s.UserOutSerializer})
    def create(self, request: Request) -> Response:
        body = s.UserInSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        user = services.user_create(actor=request.user, **body.validated_data)
        return Response(s.UserOutSerializer(user).data, status=status.HTTP_201_CREATED)

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


# --- Flavors ------------------------------------------------------------------------


class FlavorViewSet(viewsets.GenericViewSet[GpuFlavor]):
    """The GPU catalogue: everybody reads it, platform admins change it."""

    permission_classes = [permissions.IsAuthenticated, PlatformAdminWrites]
    throttle_classes = [WriteThrottle]
    serializer_class = s.FlavorOutSerializer
    filterset_class = FlavorFilter
    ordering_fields = ["name", "gpu_product"]
    lookup_field = "name"

    def get_queryset(self) -> Any:
        return selectors.flavor_list()

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(s.FlavorOutSerializer(page, many=True).data)

    def retrieve(self, request: Request, name: str) -> Response:
        return Response(s.FlavorOutSerializer(self.get_object()).data)

    @extend_schema(request=s.FlavorCreateSerializer, responses={201: s.FlavorOutSerializer})
    def create(self, request: Request) -> Response:
        body = s.FlavorCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        flavor = services.flavor_create(actor=request.user, **body.validated_data)
        return Response(s.FlavorOutSerializer(flavor).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.FlavorUpdateSerializer, responses={200: s.FlavorOutSerializer})
    def partial_update(self, request: Request, name: str) -> Response:
        flavor = self.get_object()
        body = s.FlavorUpdateSerializer(flavor, data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        flavor = services.flavor_update(
            actor=request.user, flavor=flavor, changes=body.validated_data
        )
        return Response(s.FlavorOutSerializer(flavor).data)

    @extend_schema(responses={204: None, 409: OpenApiResponse(description="Flavor in use")})
    def destroy(self, request: Request, name: str) -> Response:
        services.flavor_delete(actor=request.user, flavor=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- Cohorts ------------------------------------------------------------------------


class PlatformAdminOnly(permissions.BasePermission):
    """Platform admins only, reads included (the tree names every team's cohort)."""

    message = "Only platform admins may see or change the cohort tree."

    def has_permission(self, request: Request, view: Any) -> bool:
        return selectors.is_platform_admin(request.user)


_COHORT_NAME = OpenApiParameter("name", str, OpenApiParameter.PATH, description="Cohort name.")


class CohortViewSet(viewsets.GenericViewSet[Any]):
    """The cohort tree (Kueue's Cohort ``parentName``): which cohorts lend to and borrow
    from each other through a common root. Platform admins only."""

    permission_classes = [permissions.IsAuthenticated, PlatformAdminOnly]
    throttle_classes = [WriteThrottle]
    serializer_class = s.CohortOutSerializer
    queryset = Cohort.objects.none()  # for the schema; the tree is not a queryset

    def list(self, request: Request) -> Response:
        # DRF's paginator slices any sequence; the tree is a list, not a queryset.
        page = self.paginate_queryset(cast(Any, selectors.cohort_tree()))
        return self.get_paginated_response(s.CohortOutSerializer(page, many=True).data)

    @extend_schema(parameters=[_COHORT_NAME])
    def retrieve(self, request: Request, name: str) -> Response:
        node = selectors.cohort_node(name)
        if node is None:
            raise NotFound()  # nothing names it (the same 404 as any unknown path)
        return Response(s.CohortOutSerializer(node).data)

    @extend_schema(
        parameters=[_COHORT_NAME],
        request=s.CohortSetSerializer,
        responses={200: s.CohortOutSerializer, 201: s.CohortOutSerializer},
    )
    def update(self, request: Request, name: str) -> Response:
        body = s.CohortSetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        existed = Cohort.objects.filter(name=name).exists()
        services.cohort_set(
            actor=request.user,
            name=name,
            parent=body.validated_data.get("parent", ""),
            description=body.validated_data.get("description"),
        )
        node = selectors.cohort_node(name)
        return Response(
            s.CohortOutSerializer(node).data,
            status=status.HTTP_200_OK if existed else status.HTTP_201_CREATED,
        )

    @extend_schema(parameters=[_COHORT_NAME], responses={204: None})
    def destroy(self, request: Request, name: str) -> Response:
        cohort = Cohort.objects.filter(name=name).first()
        if cohort is None:
            raise NotFound()  # no row: nothing to remove
        services.cohort_delete(actor=request.user, cohort=cohort)
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- Tenants ------------------------------------------------------------------------


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


class TenantViewSet(viewsets.GenericViewSet[Tenant]):
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

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(s.TenantOutSerializer(page, many=True).data)

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


# --- Members ------------------------------------------------------------------------


class MemberViewSet(TenantScopedViewSet[Membership]):
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

    def list(self, request: Request, tenant_slug: str) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(s.MemberOutSerializer(page, many=True).data)

    @extend_schema(request=s.MemberInSerializer, responses={201: s.MemberOutSerializer})
    def create(self, request: Request, tenant_slug: str) -> Response:
        body = s.MemberInSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        membership = services.membership_add(
            actor=request.user, tenant=self.tenant, **body.validated_data
        )
        return Response(s.MemberOutSerializer(membership).data, status=status.HTTP_201_CREATED)

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


# --- Quotas -------------------------------------------------------------------------


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


# --- Audit --------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(
        description="Platform admins see every event, tenant admins their tenants' "
        "events; engineers and viewers get an empty list."
    )
)
class AuditEventViewSet(viewsets.GenericViewSet[AuditEvent]):
    """The audit trail, read-only, filtered by what the caller may see."""

    permission_classes = [permissions.IsAuthenticated]
    serializer_class = s.AuditEventSerializer
    filterset_class = AuditEventFilter
    ordering_fields = ["at"]
    queryset = AuditEvent.objects.none()  # for the schema; requests use get_queryset

    def get_queryset(self) -> Any:
        return selectors.audit_list(user=self.request.user)

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(s.AuditEventSerializer(page, many=True).data)
