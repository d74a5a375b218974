"""REST views of notifications: the caller's preferences and delivery log, and a
tenant's webhooks (tenant admins). Thin: selectors and services do the work."""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.api.throttles import WriteThrottle
from controlplane.api.viewsets import bodyless
from notifications import selectors, services
from notifications.api import serializers as s
from notifications.models import Delivery, TenantWebhook
from tenants.api.viewsets import TenantScopedViewSet
from tenants.models import Role, Tenant


class NoStore:
    """Responses that may carry a secret are kept by no cache."""

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        response["Cache-Control"] = "no-store"
        return response


class PreferencesViewSet(NoStore, viewsets.GenericViewSet[Any]):
    """The caller's notification preferences, one document."""

    permission_classes = [permissions.IsAuthenticated]
    throttle_classes = [WriteThrottle]
    serializer_class = s.PreferencesOutSerializer
    pagination_class = None
    filter_backends = []

    @extend_schema(
        summary="Your notification preferences", responses={200: s.PreferencesOutSerializer}
    )
    def retrieve(self, request: Request) -> Response:
        return Response(
            s.PreferencesOutSerializer(selectors.preferences_of(user=request.user)).data
        )

    @extend_schema(
        summary="Replace your notification preferences",
        description='Kinds not named keep their choice. `webhook_url` "" removes your '
        "webhook; a new URL gets a new signing secret, returned in this response only.",
        request=s.PreferencesInSerializer,
        responses={200: s.PreferencesOutSerializer},
    )
    def update(self, request: Request) -> Response:
        body = s.PreferencesInSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        secret = services.preferences_set(
            user=request.user,
            lines=[
                services.PreferenceLine(
                    kind=line["kind"], email=line["email"], webhook=line["webhook"]
                )
                for line in data["preferences"]
            ],
            webhook_url=data.get("webhook_url"),
        )
        out = selectors.preferences_of(user=request.user)
        if secret:
            out["webhook_secret"] = secret
        return Response(s.PreferencesOutSerializer(out).data)


class MyDeliveriesViewSet(viewsets.GenericViewSet[Delivery]):
    """The log of notices sent to the caller (email and their own webhook)."""

    permission_classes = [permissions.IsAuthenticated]
    serializer_class = s.DeliverySerializer
    filter_backends = []
    queryset = Delivery.objects.none()  # for the schema; requests use get_queryset

    def get_queryset(self) -> Any:
        return selectors.deliveries_of_user(user=self.request.user)

    @extend_schema(summary="Your delivery log")
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.DeliverySerializer(page, many=True).data)


class WebhookViewSet(NoStore, TenantScopedViewSet[TenantWebhook]):
    """A tenant's webhooks: tenant admins list, add, delete and test them. The secret
    is in the create response only."""

    action_roles: ClassVar[dict[str, str]] = {
        "list": Role.ADMIN,
        "create": Role.ADMIN,
        "destroy": Role.ADMIN,
        "test": Role.ADMIN,
        "deliveries": Role.ADMIN,
    }
    serializer_class = s.WebhookOutSerializer
    filter_backends = []
    lookup_field = "pk"
    lookup_url_kwarg = "webhook_id"
    queryset = TenantWebhook.objects.none()  # for the schema; requests use scoped_queryset

    def scoped_queryset(self, tenant: Tenant) -> Any:
        return selectors.tenant_webhooks(tenant=tenant)

    @extend_schema(summary="List the tenant's webhooks")
    def list(self, request: Request, tenant_slug: str) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.WebhookOutSerializer(page, many=True).data)

    @extend_schema(
        summary="Add a webhook to the tenant",
        request=s.WebhookInSerializer,
        responses={201: s.WebhookCreatedSerializer},
    )
    def create(self, request: Request, tenant_slug: str) -> Response:
        body = s.WebhookInSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        hook, secret = services.tenant_webhook_create(
            actor=request.user, tenant=self.tenant, **body.validated_data
        )
        out = {**s.WebhookOutSerializer(hook).data, "secret": secret}
        return Response(s.WebhookCreatedSerializer(out).data, status=status.HTTP_201_CREATED)

    @extend_schema(summary="Delete a webhook", responses={204: None})
    def destroy(self, request: Request, tenant_slug: str, webhook_id: str) -> Response:
        services.tenant_webhook_delete(actor=request.user, webhook=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Send a test notice to a webhook",
        request=None,
        responses={202: s.TestSentSerializer, 404: OpenApiResponse(description="No such webhook")},
    )
    @action(detail=True, methods=["post"])
    @bodyless
    def test(self, request: Request, tenant_slug: str, webhook_id: str) -> Response:
        delivery = services.tenant_webhook_test(actor=request.user, webhook=self.get_object())
        out = {"delivery_id": delivery.delivery_id, "status": delivery.status}
        return Response(s.TestSentSerializer(out).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        summary="Recent deliveries to the tenant's webhooks",
        responses={200: s.DeliverySerializer(many=True)},
    )
    @action(detail=False, methods=["get"])
    def deliveries(self, request: Request, tenant_slug: str) -> Response:
        rows: Any = selectors.tenant_deliveries(tenant=self.tenant)
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(s.DeliverySerializer(page, many=True).data)
