"""Job endpoints under ``/api/v1/tenants/{slug}/jobs/`` (DESIGN's public contract).

Create, list, detail, delete, stop, the driver's logs and a dry-run. A job's body is a
cluster request's shape plus its own fields; the checks are the services' (one set of
rules for the API and the dashboard), and the dry-run is the clusters' verdict with
the job's RayJob as its manifest. Views translate HTTP to selectors and services only.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from clusters.api.kind_views import KIND_ROLES, KindViewSet, KindWrites
from clusters.api.preemption_views import CheckpointIn
from clusters.api.renderers import LOG_RENDERERS
from clusters.api.serializers import (
    ClusterCreateInput,
    FlavorField,
    accept_flavors,
    wanted_placement,
)
from clusters.kinds.rayjob import driver_logs as job_logs
from clusters.kinds.rayjob import requests as services
from clusters.kinds.rayjob.kind import KIND as JOB_KIND
from clusters.kinds.rayjob.output import JobLogsOut, JobOut
from clusters.kinds.rayjob.spec import MAX_DEADLINE_SECONDS, MAX_TTL_AFTER_FINISHED, JobSpec
from clusters.live.log_bounds import LogBounds
from clusters.requests import checkpoints
from clusters.rows.spec import CLASS_FIELDS, PAYLOAD_FIELDS, PLACEMENT_FIELDS, ClusterSpec
from controlplane.api.serializers import JsonIntegerField
from controlplane.api.viewsets import bodyless
from tenants.models import Role


class JobCreateInput(ClusterCreateInput):
    """A cluster request's body (``kind``, ``flavor``, ``workers``, ...) without
    ``ttl_hours`` (a job ends by itself), plus ``entrypoint``, ``runtime_env``,
    ``active_deadline_seconds``, ``ttl_seconds_after_finished`` and ``cluster``."""

    ttl_hours = None  # type: ignore[assignment]
    flavor = FlavorField(required=False, allow_null=True, default=None)
    entrypoint = serializers.CharField(
        allow_blank=True,
        trim_whitespace=False,
        help_text='The shell command that starts the driver, e.g. "python train.py".',
    )
    runtime_env = serializers.JSONField(
        required=False,
        default=dict,
        help_text="What Ray sets up before the driver runs: working_dir (a remote URI), "
        "py_modules, pip, env_vars (no NVIDIA_* or CUDA_VISIBLE_DEVICES).",
    )
    active_deadline_seconds = JsonIntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=MAX_DEADLINE_SECONDS,
        help_text="Stop the job this long after it started; also its expected run time "
        "in the queue's ETAs.",
    )
    ttl_seconds_after_finished = JsonIntegerField(
        required=False,
        default=0,
        min_value=0,
        max_value=MAX_TTL_AFTER_FINISHED,
        help_text="Keep the finished job's Ray cluster this long for inspection (its GPUs "
        "count until its pods are gone).",
    )
    cluster = serializers.CharField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Run on this one of your ready dev clusters instead: the job takes no new GPUs.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = wanted_placement(accept_flavors(attrs, required=False))
        if attrs.get("cluster"):
            given = sorted(set(SHAPE_KEYS) & set(self.initial_data or {}))
            if given:
                raise serializers.ValidationError(
                    {
                        key: [
                            "A job on one of your clusters runs on that cluster's GPUs; "
                            "leave the shape out."
                        ]
                        for key in given
                    }
                )
        elif not attrs.get("flavor"):
            raise serializers.ValidationError({"flavor": [services.NO_FLAVOR]})
        return attrs


SHAPE_KEYS = (
    "flavor",
    "flavors",
    "kind",
    "workers",
    "min_workers",
    "max_workers",
    "gpu_fraction",
    "kube_cluster",
    "region",
    "topology_level",
    "topology_mode",
)


def _split(data: dict[str, Any]) -> dict[str, Any]:
    """The parsed body as the services take it: the shape (none for a job on a host)
    and the job's own fields."""
    job = JobSpec.from_data(data)
    if job.host:
        return {"spec": None, "job": job}
    keys = (
        *SHAPE_KEYS,
        *PAYLOAD_FIELDS,
        *PLACEMENT_FIELDS,
        *CLASS_FIELDS,
        "accepted_flavors",
        "name",
    )
    shape = {k: v for k, v in data.items() if k in keys}
    return {"spec": ClusterSpec.from_data(shape), "job": job}


class JobViewSet(KindViewSet):
    """Batch jobs of one tenant, looked up by name."""

    kind = JOB_KIND
    create_input = JobCreateInput
    serializer_class = JobOut
    writes = KindWrites(
        split=_split,
        create=services.job_create,
        delete=services.job_delete,
        dry_run=services.job_dry_run,
    )
    action_roles = {
        **KIND_ROLES,
        "logs": Role.VIEWER,
        "stop": Role.ENGINEER,
        "checkpoint": Role.ENGINEER,
    }

    @extend_schema(request=None, responses=JobOut)
    @action(detail=True, methods=["post"])
    @bodyless
    def stop(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        job = services.job_stop(
            actor=request.user, request=self.get_object(), role=self.tenant_role
        )
        return self._out(job)

    @extend_schema(request=CheckpointIn, responses=JobOut)
    @action(detail=True, methods=["post"])
    def checkpoint(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Report where the job's run saved its state: a job preempted afterwards resumes
        from it (``GANGWAY_RESUME_FROM``; docs/preemption.md)."""
        body = CheckpointIn(data=request.data)
        body.is_valid(raise_exception=True)
        job = checkpoints.report_checkpoint(
            actor=request.user,
            cluster=self.get_object(),
            role=self.tenant_role,
            uri=body.validated_data["uri"],
        )
        return self._out(job)

    @extend_schema(
        request=None,
        responses=JobLogsOut,
        parameters=[
            OpenApiParameter("tail", int, description="Last lines (default 200, at most 5000)."),
            OpenApiParameter(
                "limit_bytes", int, description="At most this many bytes (default 256 KiB)."
            ),
        ],
    )
    @action(detail=True, methods=["get"], renderer_classes=LOG_RENDERERS)
    def logs(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The driver's output, from the submitter pod through ``pods/log`` while it
        exists, else the tail kept when the job ended. ``?format=text`` (or ``Accept:
        text/plain``) answers the text alone."""
        bounds = LogBounds.parse(request.query_params)
        found = job_logs.driver_log(self.get_object(), bounds)
        return Response(JobLogsOut(found).data)
