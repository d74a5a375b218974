"""The GPU catalogue: everybody reads it, platform admins change it."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
)
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.api.throttles import WriteThrottle
from controlplane.api.viewsets import create_action
from tenants import selectors, services
from tenants.api import serializers as s
from tenants.api.permissions import PlatformAdminWrites
from tenants.filters import (
    FlavorFilter,
)
from tenants.models import GpuFlavor


class FlavorViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[GpuFlavor]):
    """The GPU catalogue: everybody reads it, platform admins change it."""

    permission_classes = [permissions.IsAuthenticated, PlatformAdminWrites]
    throttle_classes = [WriteThrottle]
    serializer_class = s.FlavorOutSerializer
    filterset_class = FlavorFilter
    ordering_fields = ["name", "gpu_product"]
    lookup_field = "name"

    def get_queryset(self) -> Any:
        # Each flavor's nodes per Kubernetes cluster (clusters' FlavorStock, by relation).
        return selectors.flavor_list().prefetch_related("stock__kube_cluster")

    def retrieve(self, request: Request, name: str) -> Response:
        return Response(s.FlavorOutSerializer(self.get_object()).data)

    create = create_action(s.FlavorCreateSerializer, services.flavor_create, s.FlavorOutSerializer)

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
