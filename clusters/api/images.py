"""``GET /api/v1/images/``: the Ray images a request may name (the allow-list).

Everybody signed in reads it, as they read the GPU catalogue: it is what the create
bodies' ``image`` accepts, each with the Ray version its tag names and the default
marked. The list is the settings' (:func:`clusters.domain.images.allowed_images`).
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from clusters.domain.images import allowed_images
from controlplane.api import generics as drf


class ImageOut(drf.Serializer):
    """One allowed image."""

    image = serializers.CharField(help_text="The image reference, as a create body names it.")
    ray_version = serializers.CharField(
        allow_null=True, help_text="The Ray version its tag names (null if none)."
    )
    default = serializers.BooleanField(help_text="What a request that names no image gets.")


class ImageListView(drf.ListAPIView):
    """The allow-list, in the order the platform gave it (paginated like every list)."""

    serializer_class = ImageOut
    filter_backends: list[Any] = []

    def get_queryset(self) -> Any:
        return allowed_images()
