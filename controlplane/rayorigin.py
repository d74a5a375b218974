"""The form of ``RAY_PROXY_ORIGIN``, read by the settings (to validate it and admit its
host) and by ``clusters/live/ray_origin.py`` (to serve it): ``scheme://host[:port]``, or
``scheme://{cluster}.domain[:port]`` for an origin per cluster. Lowercase, no path."""

from __future__ import annotations

import re

ORIGIN = re.compile(
    r"(?P<scheme>https?)://(?P<wild>\{cluster\}\.)?"
    r"(?P<host>[a-z0-9]([-a-z0-9.]*[a-z0-9])?)(?P<port>:\d{1,5})?"
)
