"""Cluster request endpoints under ``/api/v1/tenants/{slug}/clusters/``.

Create, list, detail, delete, suspend, resume and extend come from
:class:`clusters.api.crud.ClusterCrudMixin`; this module adds the dry-run (the verdict
the next admission pass would reach, with the manifests it would apply) and the
manifests of an existing request. Views translate HTTP to selectors and services only.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from clusters.api import listcache
from clusters.api.crud import ClusterCrudMixin
from clusters.api.renderers import LOG_RENDERERS, MANIFEST_RENDERERS, manifest_responses
from clusters.api.serializers import (
    ClusterCreateInput,
    ClusterLogsOut,
    DryRunOutput,
    ManifestsOutput,
)
from clusters.domain.shapes import DNS_LABEL_PATTERN
from clusters.kube.manifests import cluster_manifests
from clusters.live import gpu_devices
from clusters.live import pod_logs as cluster_logs
from clusters.live.log_bounds import LogBounds
from clusters.models import ClusterRequest
from clusters.queue.backends import manifest_options
from clusters.requests.dry_run import dry_run_verdict
from clusters.rows.spec import ClusterSpec
from clusters.selectors import (
    cluster_gpu_utilization,
    cluster_list,
    cluster_list_items,
    with_recent_events,
)
from tenants.api.viewsets import TenantScopedViewSet
from tenants.models import Role, Tenant


class ClusterViewSet(ClusterCrudMixin, TenantScopedViewSet[ClusterRequest]):
    """Ray cluster requests of one tenant, looked up by their Kubernetes name."""

    queryset = ClusterRequest.objects.none()  # for the OpenAPI schema only
    lookup_field = "name"
    reads_flavor_for = ("create", "dry_run")
    lookup_value_regex = DNS_LABEL_PATTERN
    action_roles = {
        **ClusterCrudMixin.crud_roles,
        "dry_run": Role.ENGINEER,
        "manifests": Role.VIEWER,
        "logs": Role.VIEWER,
    }

    def scoped_queryset(self, tenant: Tenant) -> Any:
        # Each action reads only what its response shows: the newest event per row for
        # the list, the recent history for the detail (in ``get_object``), nothing for
        # the writes and manifests (writes answer with a fresh read, see ``_out``).
        if self.action == "list":
            queryset = cluster_list_items(tenant=tenant)
        else:
            queryset = cluster_list(tenant=tenant)
        return queryset.not_deleted()

    def get_object(self) -> ClusterRequest:
        cluster: ClusterRequest = super().get_object()
        if self.action == "retrieve":
            # One row's history is a plain ORDER BY ... LIMIT; the detail queryset's
            # sliced prefetch (a window over every row) took more of a GET's time to
            # compile than the rest of the request.
            with_recent_events(cluster)
            if cluster.admitted_at is not None:  # never admitted: no GPU ever read
                cluster.gpu_utilization = cluster_gpu_utilization(cluster)  # type: ignore[attr-defined]
            if gpu_devices.wants_devices(cluster):
                read = gpu_devices.cluster_devices(cluster)
                cluster.gpu_devices = None if read.error else read.devices  # type: ignore[attr-defined]
        return cluster

    # A kept page is sent as the bytes it was rendered to: an HttpResponse, not DRF's.
    def list(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:  # type: ignore[override]
        """A page of the tenant's clusters; served from :mod:`clusters.api.listcache`
        while nothing it shows has changed."""
        renderer, media_type = request.accepted_renderer, request.accepted_media_type
        if not listcache.enabled() or renderer.format != "json":
            # The browsable API (DEBUG only) renders around the response: not kept.
            return super().list(request, *args, **kwargs)
        context = self.get_renderer_context()

        def render(data: Any) -> bytes:
            return bytes(renderer.render(data, media_type, context))

        # The fingerprint first: what is rendered after it is at least as new as it.
        cache_key = listcache.key(
            self.tenant,
            request.build_absolute_uri(),
            media_type,
            listcache.fingerprint(self.tenant),
        )
        body = listcache.get(cache_key, render=render)
        if body is None:
            response = super().list(request, *args, **kwargs)
            if response.status_code != status.HTTP_200_OK:
                return response
            body = render(response.data)
            listcache.put(cache_key, response.data, body)
        # What DRF's Response would send for these bytes (finalize_response adds the
        # view's headers to either).
        content_type = renderer.media_type
        if renderer.charset:
            content_type = f"{content_type}; charset={renderer.charset}"
        return HttpResponse(body, content_type=content_type)

    @extend_schema(request=ClusterCreateInput, responses=manifest_responses(DryRunOutput))
    @action(detail=False, methods=["post"], url_path="dry-run", renderer_classes=MANIFEST_RENDERERS)
    def dry_run(self, request: Request, tenant_slug: str) -> Response:
        """Would this request start now, queue (where, until when) or never fit? Writes nothing.

        The verdict is :func:`clusters.requests.dry_run.dry_run_verdict`, which the dashboard's
        verdict panel calls too.
        """
        body = ClusterCreateInput(
            data=request.data,
            context={
                "tenant": self.tenant,
                "kai_enabled": settings.KAI_ENABLED,
                "flavor_read": self.flavor_read,
            },
        )
        body.is_valid(raise_exception=True)
        result = dry_run_verdict(
            tenant=self.tenant,
            owner=request.user,
            spec=ClusterSpec.from_data(body.validated_data),
            role=self.tenant_role,
        )
        return Response(result, status=status.HTTP_200_OK)

    @extend_schema(request=None, responses=manifest_responses(ManifestsOutput))
    @action(detail=True, methods=["get"], renderer_classes=MANIFEST_RENDERERS)
    def manifests(self, request: Request, tenant_slug: str, name: str) -> Response:
        """The Kubernetes objects of an existing request, as they are applied."""
        cluster = self.get_object()
        return Response({"manifests": cluster_manifests(cluster, **manifest_options())})

    @extend_schema(
        request=None,
        responses=ClusterLogsOut,
        parameters=[
            OpenApiParameter("pod", str, description="A pod of the cluster (default: the head)."),
            OpenApiParameter("container", str, description="Its container (default: the first)."),
            OpenApiParameter("tail", int, description="Last lines (default 200, at most 5000)."),
            OpenApiParameter(
                "limit_bytes", int, description="At most this many bytes (default 256 KiB)."
            ),
        ],
    )
    @action(detail=True, methods=["get"], renderer_classes=LOG_RENDERERS)
    def logs(self, request: Request, tenant_slug: str, name: str) -> Response:
        """A pod's log through ``pods/log``: the head's by default, or ``?pod=`` one of
        ``pods`` (the cluster's pods, listed in the answer). ``?format=text`` (or
        ``Accept: text/plain``) answers the text alone."""
        cluster = self.get_object()
        bounds = LogBounds.parse(request.query_params)
        pod, container = cluster_logs.parse_choice(request.query_params)
        found = cluster_logs.pod_log(cluster, pod=pod, container=container, bounds=bounds)
        return Response(ClusterLogsOut(found).data)
