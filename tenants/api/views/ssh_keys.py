"""``/api/v1/users/me/ssh-keys/``: the caller's own SSH public keys (list, add, remove)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, status, viewsets
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.api.throttles import WriteThrottle
from controlplane.api.viewsets import create_action
from tenants import selectors, services
from tenants.api import serializers as s
from tenants.ssh_keys import SshKey


class SshKeyViewSet(viewsets.GenericViewSet[Any]):
    """Your SSH public keys: clusters asked for with ``ssh: true`` accept them."""

    permission_classes = [permissions.IsAuthenticated]
    throttle_classes = [WriteThrottle]
    serializer_class = s.SshKeyOutSerializer
    filterset_class = None
    queryset = SshKey.objects.none()  # for the schema; requests use get_queryset
    lookup_url_kwarg = "key_id"

    def get_queryset(self) -> Any:
        return selectors.ssh_key_list(user=self.request.user)

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.SshKeyOutSerializer(page, many=True).data)

    create = create_action(
        s.SshKeyInSerializer, services.ssh_key_add, s.SshKeyOutSerializer, caller="user"
    )

    def retrieve(self, request: Request, key_id: int) -> Response:
        key = self.get_queryset().filter(pk=key_id).first()
        if key is None:
            raise NotFound()
        return Response(s.SshKeyOutSerializer(key).data)

    @extend_schema(responses={204: OpenApiResponse(description="Removed.")})
    def destroy(self, request: Request, key_id: int) -> Response:
        services.ssh_key_remove(user=request.user, key_id=key_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
