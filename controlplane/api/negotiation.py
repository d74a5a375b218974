"""Content negotiation: a format the endpoint does not offer is a 406 that names the
ones it does.

DRF answers ``?format=xml`` with a bare 404, as if the resource did not exist. Here
the client learns what it may ask for instead (only the manifests endpoint offers
``yaml``; ``api`` is the browsable API, in development only).
"""

from __future__ import annotations

from collections.abc import Iterable

from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer


class ContentNegotiation(DefaultContentNegotiation):
    """DRF's negotiation with a clear 406 for an unknown ``?format=``."""

    def filter_renderers(
        self, renderers: Iterable[BaseRenderer], format: str
    ) -> list[BaseRenderer]:
        renderers = list(renderers)
        offered = [renderer for renderer in renderers if renderer.format == format]
        if not offered:
            names = ", ".join(sorted({renderer.format for renderer in renderers}))
            raise NotAcceptable(
                f"This endpoint does not offer the format {format[:40]!r}; it offers: {names}.",
                available_renderers=renderers,
            )
        return offered
