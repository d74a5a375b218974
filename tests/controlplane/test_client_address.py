"""The one rule for a client's address: the TCP peer, unless a configured number of
trusted proxies stand in front, and then their entry of X-Forwarded-For."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import RequestFactory
from rest_framework.request import Request

from controlplane.addresses import address_bucket, client_address
from controlplane.api.throttles import AuthThrottle, WriteThrottle


def _request(remote: str = "192.0.2.1", forwarded: str | None = None) -> Any:
    extra = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return RequestFactory().get("/", **extra)


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        # No trusted proxy (the default): the header is the client's own words.
        (0, None, "192.0.2.1"),
        (0, "203.0.113.9", "192.0.2.1"),
        (0, "203.0.113.9, 198.51.100.2", "192.0.2.1"),
        # One proxy: the entry it appended, whatever the client wrote before it.
        (1, "198.51.100.2", "198.51.100.2"),
        (1, "203.0.113.9, 198.51.100.2", "198.51.100.2"),
        (1, "spoof, 10.0.0.1,203.0.113.9 , 198.51.100.2", "198.51.100.2"),
        # Two proxies: the outer one's entry, second from the right.
        (2, "203.0.113.9, 198.51.100.2, 10.1.0.5", "198.51.100.2"),
        (2, "198.51.100.2, 10.1.0.5", "198.51.100.2"),
        # Fewer entries than proxies: the request skipped a proxy, trust nothing in it.
        (1, None, "192.0.2.1"),
        (1, "", "192.0.2.1"),
        (2, "198.51.100.2", "192.0.2.1"),
        # An entry that is not an address (a proxy that writes "unknown") proves nothing.
        (1, "unknown", "192.0.2.1"),
        (1, "203.0.113.9, 198.51.100.2:4431", "192.0.2.1"),
        # IPv6 entries are normalised so that one address has one spelling.
        (1, "2001:DB8:0:0::1", "2001:db8::1"),
    ],
)
def test_client_address(settings: Any, proxies: int, forwarded: str | None, expected: str) -> None:
    settings.TRUSTED_PROXY_COUNT = proxies
    assert client_address(_request(forwarded=forwarded)) == expected


def test_drf_requests_are_read_the_same_way(settings: Any) -> None:
    settings.TRUSTED_PROXY_COUNT = 1
    request = Request(_request(forwarded="203.0.113.9, 198.51.100.2"))
    assert client_address(request) == "198.51.100.2"


def test_an_ipv6_client_is_counted_by_its_slash_64() -> None:
    # One host routinely holds a whole /64: per-address limits must not reset per address.
    assert address_bucket("2001:db8:1:2:aaaa::1") == address_bucket("2001:db8:1:2:bbbb::9")
    assert address_bucket("2001:db8:1:2::1") != address_bucket("2001:db8:1:3::1")
    assert address_bucket("192.0.2.1") == "192.0.2.1"
    assert address_bucket("192.0.2.1") != address_bucket("192.0.2.2")


@pytest.mark.parametrize("throttle", [AuthThrottle, WriteThrottle])
def test_the_api_throttles_use_the_same_rule(settings: Any, throttle: Any) -> None:
    settings.TRUSTED_PROXY_COUNT = 0
    spoofed = Request(_request(forwarded="203.0.113.9"))
    assert throttle().get_ident(spoofed) == "192.0.2.1"
    settings.TRUSTED_PROXY_COUNT = 1
    assert throttle().get_ident(spoofed) == "203.0.113.9"
