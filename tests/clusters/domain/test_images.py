"""The allow-list of Ray images (clusters.domain.images): read from the settings in one
place, each with the Ray version its tag names and the default marked."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from clusters.domain.images import Image, allowed_images, ray_version, resolve_image


def test_ray_version_reads_the_tag() -> None:
    assert ray_version("rayproject/ray:2.49.2-py311-gpu") == "2.49.2"
    assert ray_version("registry.example/ray@sha256:abc") is None


def test_allowed_images_keep_their_order_and_mark_the_default(settings: Any) -> None:
    settings.RAY_IMAGE_ALLOWLIST = ["rayproject/ray:2.49.2-gpu", "example/custom:latest"]
    settings.RAY_IMAGE_DEFAULT = "example/custom:latest"
    assert allowed_images() == [
        Image("rayproject/ray:2.49.2-gpu", "2.49.2", default=False),
        Image("example/custom:latest", None, default=True),
    ]


def test_resolve_image_prefers_the_explicit_then_the_request_then_the_default(
    settings: Any,
) -> None:
    settings.RAY_IMAGE_DEFAULT = "rayproject/ray:2.49.2-gpu"
    row = SimpleNamespace(image="example/mine:1")
    assert resolve_image(row, "example/explicit:2") == "example/explicit:2"
    assert resolve_image(row) == "example/mine:1"
    assert resolve_image(SimpleNamespace(image="")) == "rayproject/ray:2.49.2-gpu"
    assert resolve_image(object()) == "rayproject/ray:2.49.2-gpu"
