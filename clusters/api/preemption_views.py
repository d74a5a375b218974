"""The preemption notice endpoint a Ray driver polls without a user's credentials
(docs/preemption.md): ``GET /api/v1/preemption/{token}/`` answers whether its run has
notice, until when and why, and the checkpoint it resumes from; ``POST .../checkpoint/``
``{"uri": ...}`` records where it saved its state. The token (``GANGWAY_PREEMPTION_URL``
in its pods) is the credential: an unknown one is a 404, bad input a 400.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.requests import checkpoints
from controlplane.api.serializers import StrictSerializer


class CheckpointIn(StrictSerializer):
    """Body of a checkpoint report: where the run saved its state."""

    uri = serializers.CharField(
        max_length=1000,
        help_text="The checkpoint's address (s3://..., gs://..., file://..., an absolute "
        "path); the next run after a preemption gets it as GANGWAY_RESUME_FROM.",
    )


class PreemptionNoticeOut(serializers.Serializer[Any]):
    """What a run reads of its preemption notice."""

    notice = serializers.BooleanField(help_text="Whether the run has notice of a preemption.")
    deadline = serializers.DateTimeField(
        allow_null=True, help_text="When it is stopped (and a job requeued)."
    )
    reason = serializers.CharField(allow_blank=True)
    resume_from = serializers.CharField(
        allow_blank=True, help_text="The checkpoint this run starts from (GANGWAY_RESUME_FROM)."
    )
    checkpoint_uri = serializers.CharField(allow_blank=True)
    checkpointed_at = serializers.DateTimeField(allow_null=True)
    preemptions = serializers.IntegerField()
    state = serializers.CharField()


class _TokenView(APIView):
    """Open to anyone holding a request's token; no session or header is read."""

    permission_classes = [permissions.AllowAny]

    def get_authenticators(self) -> list[Any]:
        return []  # the token in the path is the only credential

    def _row(self, token: str) -> Any:
        row = checkpoints.row_of_token(token)
        if row is None:
            raise NotFound()
        return row


class PreemptionNoticeView(_TokenView):
    """``GET``: the run's notice (polled by ``gangway_preemption.wait()``)."""

    @extend_schema(
        responses={200: PreemptionNoticeOut}, summary="A run's preemption notice (by token)"
    )
    def get(self, request: Request, token: str) -> Response:
        return Response(PreemptionNoticeOut(checkpoints.notice_of(self._row(token))).data)


class PreemptionCheckpointView(_TokenView):
    """``POST``: the run reports a checkpoint."""

    @extend_schema(
        request=CheckpointIn,
        responses={200: PreemptionNoticeOut},
        summary="Report a run's checkpoint (by token)",
    )
    def post(self, request: Request, token: str) -> Response:
        row = self._row(token)
        body = CheckpointIn(data=request.data)
        body.is_valid(raise_exception=True)
        row = checkpoints.report_by_token(token, body.validated_data["uri"])
        if row is None:
            raise NotFound()
        return Response(
            PreemptionNoticeOut(checkpoints.notice_of(row)).data, status=status.HTTP_200_OK
        )
