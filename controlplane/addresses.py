"""The client's address: one rule for every throttle, lockout, audit row and log line.

Every proxy appends the address it saw to ``X-Forwarded-For``; only the entries of
proxies we run can be believed. With ``TRUSTED_PROXY_COUNT`` = N the client is the N-th
entry from the right; with none (the default) the header is ignored and the client is
``REMOTE_ADDR``. DRF's ``get_ident`` is not used: by default it keys throttles on the
whole header, which a client rewrites at will.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings


def client_address(request: Any) -> str:
    """The address of the client that sent ``request`` (a Django or DRF request).

    Falls back to ``REMOTE_ADDR`` whenever the header cannot be trusted: fewer entries
    than trusted proxies (the request did not come through all of them) or an entry
    that is not an IP address. That errs towards the proxy's own address, which
    throttles more, never less.
    """
    peer = str(request.META.get("REMOTE_ADDR") or "")
    proxies = settings.TRUSTED_PROXY_COUNT
    if proxies <= 0:
        return peer
    header = str(request.META.get("HTTP_X_FORWARDED_FOR") or "")
    entries = [entry.strip() for entry in header.split(",") if entry.strip()]
    if len(entries) < proxies:
        return peer
    try:
        return str(ipaddress.ip_address(entries[-proxies]))
    except ValueError:
        return peer


def address_bucket(address: str) -> str:
    """What a per-address limit counts: an IPv4 address, or the /64 of an IPv6 one.

    A single IPv6 host is routinely given a whole /64, so counting its addresses one
    by one would let it step to a fresh address whenever it was throttled.
    """
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)
