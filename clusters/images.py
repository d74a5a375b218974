"""The Ray images a request may run: the allow-list of settings, read in one place.

``RAY_IMAGE_ALLOWLIST`` names the images (references as ``docker pull`` takes them) and
``RAY_IMAGE_DEFAULT`` the one a request gets when it names none. The API lists them
(``GET /api/v1/images/``), the dashboard offers them in its forms, the services refuse
any other (:func:`clusters.shapes.validate_request`), and a system check
(:mod:`controlplane.checks`) refuses to start with a list that could not work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings

# An image reference: [registry[:port]/]path[:tag][@digest]. Lower-case path components
# as the distribution spec has them; a tag of at most 128 characters.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REGISTRY = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9-]+)*(?::[0-9]+)?/)?"
REFERENCE_RE = re.compile(
    rf"^{_REGISTRY}{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)
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


def allowlist_faults(allowlist: list[str], default: str) -> list[str]:
    """What is wrong with an allow-list and its default (empty: nothing): every entry
    is an image reference, none is named twice, and the default is one of them."""
    faults = [
        f"{ref!r} is not an image reference." for ref in allowlist if not REFERENCE_RE.match(ref)
    ]
    twice = sorted({ref for ref in allowlist if allowlist.count(ref) > 1})
    if twice:
        faults.append(f"Named more than once: {', '.join(twice)}.")
    if not allowlist:
        faults.append("The allow-list is empty: no request could name an image.")
    if default not in allowlist:
        faults.append(f"The default image {default!r} is not in the allow-list.")
    return faults
