"""The cohort tree, for platform admins only: reads and writes."""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
)
from rest_framework import permissions, status, viewsets
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.api.throttles import WriteThrottle
from tenants import selectors, services
from tenants.api import serializers as s
from tenants.api.permissions import PlatformAdminOnly
from tenants.models import Cohort

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
