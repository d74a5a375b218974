"""A YAML renderer for manifests: ``?format=yaml`` or ``Accept: application/yaml``.

The body is one multi-document stream of the Kubernetes objects (the ``manifests`` of
the response), so ``curl ... | kubectl apply -f -`` works. Anything that is not a
manifests response (an error) is rendered as a single YAML document.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from rest_framework.renderers import BaseRenderer

from clusters.kube.manifests import to_yaml


class YAMLRenderer(BaseRenderer):
    """Renders ``{"manifests": [...]}`` as multi-document YAML, anything else as one document."""

    media_type = "application/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if data is None:
            return b""
        if isinstance(data, dict) and isinstance(data.get("manifests"), list):
            return to_yaml(data["manifests"]).encode()
        return yaml.safe_dump(data, sort_keys=True, default_flow_style=False).encode()
