"""Cluster request endpoints under ``/api/v1/tenants/{slug}/clusters/``.

Create, list, detail, delete, suspend, resume and extend come from
:class:`clusters.api.crud.ClusterCrudMixin`; this module adds the dry-run (the verdict
the next admission pass would reach, with the manifests it would apply) and the
manifests of an existing request. Views translate HTTP to selectors and services only.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from clusters import admission as adm
from clusters import services
from clusters.api.crud import ClusterCrudMixin
from clusters.api.renderers import YAMLRenderer
from clusters.api.serializers import ClusterCreateInput, DryRunOutput, ManifestsOutput
from clusters.kube.manifests import cluster_manifests
from clusters.models import ClusterKind, ClusterRequest
from clusters.queueing import build_snapshot, pending_of
from clusters.selectors import cluster_detail_queryset
from clusters.shapes import DNS_LABEL_PATTERN
from controlplane.api.viewsets import TenantScopedViewSet
from tenants.models import GpuFlavor, Role, Tenant

DRY_RUN_NAME = "dry-run-cluster"
_CANDIDATE_ID = -1


class ClusterViewSet(ClusterCrudMixin, TenantScopedViewSet):
    """Ray cluster requests of one tenant, looked up by their Kubernetes name."""

    queryset = ClusterRequest.objects.none()  # for the OpenAPI schema only
    lookup_field = "name"
    lookup_value_regex = DNS_LABEL_PATTERN
    renderer_classes = [JSONRenderer, YAMLRenderer]
    action_roles = {
        **ClusterCrudMixin.crud_roles,
        "dry_run": Role.ENGINEER,
        "manifests": Role.VIEWER,
    }

    def scoped_queryset(self, tenant: Tenant) -> Any:
        return cluster_detail_queryset(tenant=tenant).exclude(state="deleted")

    def _manifest_options(self) -> dict[str, Any]:
        return {"queue_mode": settings.QUEUE_MODE, "kai_enabled": settings.KAI_ENABLED}

    @extend_schema(request=ClusterCreateInput, responses=DryRunOutput)
    @action(detail=False, methods=["post"], url_path="dry-run")
    def dry_run(self, request: Request, tenant_slug: str) -> Response:
        """Would this request start now, queue (where, until when) or never fit? Writes nothing.

        The verdict comes from the same decision function the admission pass runs, on
        the current snapshot with this request added; alternatives are the same request
        on the other flavors of the catalogue.
        """
        body = ClusterCreateInput(
            data=request.data,
            context={"tenant": self.tenant, "kai_enabled": settings.KAI_ENABLED},
        )
        body.is_valid(raise_exception=True)
        attrs = body.validated_data
        if attrs["kind"] == ClusterKind.PROD and self.tenant_role != Role.ADMIN:
            raise PermissionDenied("Only tenant admins may request production clusters.")
        shape = {
            "kind": attrs["kind"],
            "workers": attrs["workers"],
            "min_workers": attrs.get("min_workers"),
            "max_workers": attrs.get("max_workers"),
            "gpu_fraction": attrs.get("gpu_fraction"),
            "ttl_hours": attrs.get("ttl_hours"),
        }
        cluster = services.build_request(
            tenant=self.tenant,
            owner=request.user,
            name=attrs.get("name") or DRY_RUN_NAME,
            flavor=attrs["flavor"],
            **shape,
        )
        snapshot, _ = build_snapshot()
        alternatives = []
        for flavor in GpuFlavor.objects.exclude(pk=attrs["flavor"].pk):
            try:
                other = services.build_request(
                    tenant=self.tenant,
                    owner=request.user,
                    name=DRY_RUN_NAME,
                    flavor=flavor,
                    **{**shape, "gpu_fraction": None, "min_workers": None, "max_workers": None}
                    if attrs["kind"] == ClusterKind.DEV
                    else shape,
                )
            except ValidationError:
                continue  # this shape is not valid on that flavor
            alternatives.append(pending_of(other, pk=_CANDIDATE_ID))
        verdict = adm.dry_run(snapshot, pending_of(cluster, pk=_CANDIDATE_ID), alternatives)
        result = {
            "verdict": verdict.verdict,
            "reasons": [asdict(reason) for reason in verdict.reasons],
            "summary": verdict.summary,
            "position": verdict.position,
            "flavor_position": verdict.flavor_position,
            "eta": verdict.eta,
            "eta_text": adm.format_eta(verdict.eta, snapshot.now)
            if verdict.verdict == "will_queue"
            else "",
            "alternatives": [asdict(alt) for alt in verdict.alternatives],
            "manifests": cluster_manifests(cluster, **self._manifest_options()),
        }
        return Response(result, status=status.HTTP_200_OK)

    @extend_schema(request=None, responses=ManifestsOutput)
    @action(detail=True, methods=["get"])
    def manifests(self, request: Request, tenant_slug: str, name: str) -> Response:
        """The Kubernetes objects of an existing request, as they are applied."""
        cluster = self.get_object()
        return Response({"manifests": cluster_manifests(cluster, **self._manifest_options())})
