"""A job as the API returns it: the request's fields, its run's, and its driver's output."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from clusters import selectors
from clusters.models import ClusterRequest
from clusters.output.request import UnattendedOut
from controlplane.api import generics as drf


class JobRunOut(drf.Serializer):
    """What a job runs and how its run went."""

    entrypoint = serializers.CharField()
    runtime_env = serializers.JSONField()
    active_deadline_seconds = serializers.IntegerField(allow_null=True)
    ttl_seconds_after_finished = serializers.IntegerField()
    cluster = serializers.CharField(
        source="host.name", allow_null=True, default=None, help_text="The host dev cluster."
    )
    ray_job_id = serializers.CharField()
    ray_cluster_name = serializers.CharField()
    job_status = serializers.CharField(help_text="Ray's status of the job.")
    message = serializers.CharField()
    started_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True)


class JobOut(UnattendedOut):
    """A job as the API returns it: the request's fields (state, queue, GPUs, history)
    and the run's (``job``), with ``gpu_hours`` and when its GPUs were released."""

    job = JobRunOut()
    gpu_hours = serializers.SerializerMethodField()

    class Meta(UnattendedOut.Meta):
        fields = [
            *UnattendedOut.Meta.fields,
            "gpus_released_at",
            "job",
            "gpu_hours",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.FloatField())
    def get_gpu_hours(self, obj: ClusterRequest) -> float:
        return round(float(selectors.gpu_hours_of(obj)), 4)


class JobLogsOut(drf.Serializer):
    """The driver's output: the last ``tail`` lines (at most ``limit_bytes``)."""

    origin = serializers.ChoiceField(
        choices=["pod", "saved", "none"],
        help_text="pod: read now from the submitter pod; saved: kept when the job ended "
        "(its pods are gone); none: nothing yet.",
    )
    pod = serializers.CharField(allow_blank=True)
    text = serializers.CharField(allow_blank=True)
    truncated = serializers.BooleanField()
    message = serializers.CharField(allow_blank=True)
