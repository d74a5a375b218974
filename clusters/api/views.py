"""Cluster request endpoints under ``/api/v1/tenants/{slug}/clusters/``.

For now: the dry-run (what a request would apply) and the manifests of an existing
request. The viewset is the one the create/list/detail/delete actions will join.
"""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import User
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, status
from rest_framework.decorators import action
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from clusters.api.renderers import YAMLRenderer
from clusters.api.serializers import ClusterCreateInput, DryRunOutput, ManifestsOutput
from clusters.kube.manifests import cluster_manifests
from clusters.models import ClusterKind, ClusterRequest
from clusters.shapes import DNS_LABEL_PATTERN, resolve_ttl_hours
from clusters.states import State
from controlplane.api.viewsets import TenantScopedViewSet
from tenants.models import Role, Tenant

DRY_RUN_NAME = "dry-run-cluster"


class ClusterViewSet(TenantScopedViewSet):
    """Ray cluster requests of one tenant (looked up by their Kubernetes name)."""

    queryset = ClusterRequest.objects.none()  # for the OpenAPI schema only
    serializer_class = ClusterCreateInput
    lookup_field = "name"
    lookup_value_regex = DNS_LABEL_PATTERN
    renderer_classes = [JSONRenderer, YAMLRenderer]
    action_roles = {"dry_run": Role.ENGINEER, "manifests": Role.VIEWER}

    def scoped_queryset(self, tenant: Tenant) -> Any:
        return (
            ClusterRequest.objects.filter(tenant=tenant)
            .exclude(state=State.DELETED)
            .select_related("tenant", "flavor", "owner")
        )

    def _manifest_options(self) -> dict[str, Any]:
        return {"queue_mode": settings.QUEUE_MODE, "kai_enabled": settings.KAI_ENABLED}

    @extend_schema(request=ClusterCreateInput, responses=DryRunOutput)
    @action(detail=False, methods=["post"], url_path="dry-run")
    def dry_run(self, request: Request, tenant_slug: str) -> Response:
        """What a create with this body would apply; writes nothing.

        ``verdict``, ``reasons`` and ``eta`` are filled by admission; here the shape is
        validated and its manifests built from an unsaved request.
        """
        data = ClusterCreateInput(
            data=request.data,
            context={"tenant": self.tenant, "kai_enabled": settings.KAI_ENABLED},
        )
        data.is_valid(raise_exception=True)
        attrs = data.validated_data
        if attrs["kind"] == ClusterKind.PROD and self.tenant_role != Role.ADMIN:
            raise exceptions.PermissionDenied("Only tenant admins may request production clusters.")
        cluster = ClusterRequest(
            tenant=self.tenant,
            owner=cast(User, request.user),
            name=attrs.get("name") or DRY_RUN_NAME,
            kind=attrs["kind"],
            flavor=attrs["flavor"],
            workers=attrs["workers"],
            min_workers=attrs.get("min_workers"),
            max_workers=attrs.get("max_workers"),
            gpu_fraction=attrs.get("gpu_fraction"),
            ttl_hours=resolve_ttl_hours(
                tenant=self.tenant, kind=attrs["kind"], ttl_hours=attrs.get("ttl_hours")
            ),
        )
        body = {
            "verdict": None,
            "reasons": [],
            "eta": None,
            "manifests": cluster_manifests(cluster, **self._manifest_options()),
        }
        return Response(body, status=status.HTTP_200_OK)

    @extend_schema(request=None, responses=ManifestsOutput)
    @action(detail=True, methods=["get"])
    def manifests(self, request: Request, tenant_slug: str, name: str) -> Response:
        """The Kubernetes objects of an existing request, as they are applied."""
        cluster = self.get_object()
        return Response({"manifests": cluster_manifests(cluster, **self._manifest_options())})
