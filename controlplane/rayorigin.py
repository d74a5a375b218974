"""The form of ``RAY_PROXY_ORIGIN``, read by the settings (to validate it and admit its
host), by ``clusters/live/ray_origin.py`` (to serve it) and by the WebSocket gate (to let
its handshakes reach it): ``scheme://host[:port]``, or ``scheme://{cluster}.domain[:port]``
for an origin per cluster. Lowercase, no path."""

from __future__ import annotations

import re

ORIGIN = re.compile(
    r"(?P<scheme>https?)://(?P<wild>\{cluster\}\.)?"
    r"(?P<host>[a-z0-9]([-a-z0-9.]*[a-z0-9])?)(?P<port>:\d{1,5})?"
)


def serves_host(origin: str, host: str) -> bool:
    """Whether ``host`` (a ``Host`` header, with its port) is one of ``origin``'s."""
    found = ORIGIN.fullmatch(origin.lower())
    if found is None:
        return False
    own = found["host"] + (found["port"] or "")
    host = host.lower()
    if not found["wild"]:
        return host == own
    label, dot, rest = host.partition(".")
    return bool(dot and label) and rest == own
