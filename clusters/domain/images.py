"""The Ray images a request may run: the allow-list of settings, read in one place.

``RAY_IMAGE_ALLOWLIST`` names the images (references as ``docker pull`` takes them) and
``RAY_IMAGE_DEFAULT`` the one a request gets when it names none. The API lists them
(``GET /api/v1/images/``), the dashboard offers them in its forms, the services refuse
any other (:func:`clusters.domain.request_validation.validate_request`), and a system check
(:func:`controlplane.checks.image_allowlist`) refuses a list that could not work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings

_VERSION_RE = re.compile(r":(\d+\.\d+\.\d+)")


@dataclass(frozen=True)
class Image:
    """One allowed image: its reference, the Ray version its tag names, and whether it
    is the default."""

    image: str
    ray_version: str | None
    default: bool


def ray_version(image: str) -> str | None:
    """The Ray version in an image tag (``rayproject/ray:2.49.2-py311-gpu`` -> ``2.49.2``)."""
    match = _VERSION_RE.search(image)
    return match.group(1) if match else None


def resolve_image(cluster: Any, image: str | None = None) -> str:
    """The image: the explicit one, the request's, or the default setting."""
    return image or str(getattr(cluster, "image", "") or "") or settings.RAY_IMAGE_DEFAULT


def allowed_images() -> list[Image]:
    """The allow-list in its order, each with its Ray version and the default marked."""
    return [
        Image(image=ref, ray_version=ray_version(ref), default=ref == settings.RAY_IMAGE_DEFAULT)
        for ref in settings.RAY_IMAGE_ALLOWLIST
    ]
