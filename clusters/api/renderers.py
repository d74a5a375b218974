"""A YAML renderer for manifests: ``?format=yaml`` or ``Accept: application/yaml``.

The body is one multi-document stream of the Kubernetes objects (the ``manifests`` of
the response), so ``curl ... | kubectl apply -f -`` works. Anything that is not a
manifests response (an error) is rendered as a single YAML document, through the JSON
encoder first so that every type a response may hold (Decimal, datetime, UUID, lazy
strings) reads exactly as it does in JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml
from drf_spectacular.utils import OpenApiResponse
from rest_framework.renderers import BaseRenderer
from rest_framework.settings import api_settings
from rest_framework.utils.encoders import JSONEncoder

from clusters.kube.manifests import to_yaml


class _TextRenderer(BaseRenderer):
    """A renderer of one response as UTF-8 text of its own media type."""

    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        return self.text(data).encode()

    def text(self, data: Any) -> str:
        raise NotImplementedError


class YAMLRenderer(_TextRenderer):
    """Renders ``{"manifests": [...]}`` as multi-document YAML, anything else as one document."""

    media_type = "application/yaml"
    format = "yaml"

    def text(self, data: Any) -> str:
        if data is None:
            return ""
        if isinstance(data, dict) and isinstance(data.get("manifests"), list):
            return to_yaml(data["manifests"])
        plain = json.loads(json.dumps(data, cls=JSONEncoder))
        return str(yaml.safe_dump(plain, sort_keys=True, default_flow_style=False))


class LogTextRenderer(_TextRenderer):
    """Renders a log response's ``text`` as plain text (``?format=text`` or
    ``Accept: text/plain``), for ``curl ... | less``; an error reads as one line,
    ``<code>: <message>``."""

    media_type = "text/plain"
    format = "text"

    def text(self, data: Any) -> str:
        text = data.get("text") if isinstance(data, dict) else None
        if isinstance(text, str) and text:
            return text
        if isinstance(text, str):
            # No lines: say why in one line. (An empty body would also lose its
            # Content-Type: DRF drops the header of an empty response.)
            return f"({data.get('message') or 'no log lines yet'})\n"
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict):
            return f"{error.get('code')}: {error.get('message')}\n"
        return str(json.dumps(data, cls=JSONEncoder))


# The renderers of a log endpoint: the API's own plus plain text.
LOG_RENDERERS = [*api_settings.DEFAULT_RENDERER_CLASSES, LogTextRenderer]


# The renderers of the endpoints that return manifests (the manifests of a request, and
# the dry-run's): the API's own plus YAML. Other endpoints offer no YAML (a 406).
MANIFEST_RENDERERS = [*api_settings.DEFAULT_RENDERER_CLASSES, YAMLRenderer]


# What each YAML document of the stream is. OpenAPI describes one document per body, so
# this is the schema of every document (today the stream holds one: the RayCluster).
KUBERNETES_OBJECT = {
    "type": "object",
    "description": "A Kubernetes object; the body holds one YAML document per object.",
    "required": ["apiVersion", "kind", "metadata"],
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
    },
}


def manifest_responses(serializer: Any) -> dict[tuple[int, str], Any]:
    """The schema of a manifests endpoint's 200: ``serializer`` as JSON; as YAML, the
    manifests alone, one document each."""
    return {
        (200, "application/json"): OpenApiResponse(
            serializer,
            description="As JSON; with `?format=yaml` (or `Accept: application/yaml`) the "
            "`manifests` alone, as one multi-document YAML stream for `kubectl apply -f -`.",
        ),
        (200, "application/yaml"): KUBERNETES_OBJECT,
    }
