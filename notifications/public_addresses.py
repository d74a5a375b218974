"""Where a webhook may be sent: public addresses only, unless a deployment names a host.

A webhook URL is a user's choice, so it must not reach what only the control plane can
(loopback, the pod network, cloud metadata). :func:`pinned_address` resolves the host
once, refuses it if any address is not public (IPv4 inside IPv6 unwrapped; the local
NAT64 prefix 64:ff9b:1::/48 always refused) and returns the one address to connect to,
so a changed DNS answer cannot move the connection. ``NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS``
(or ``NOTIFY_ALLOW_PRIVATE_WEBHOOKS``) lets hosts pass, still resolved once and pinned.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_V6 = ipaddress.IPv6Network
# Forms whose low 32 bits are the IPv4 address they stand for.
_LOW_32_EMBEDDINGS = (
    _V6("::ffff:0:0/96"),  # IPv4-mapped
    _V6("::ffff:0:0:0/96"),  # SIIT (IPv4-translated)
    _V6("64:ff9b::/96"),  # NAT64, the well-known prefix
    _V6("::/96"),  # IPv4-compatible (deprecated, still routed by some stacks)
)
_NAT64_LOCAL = _V6("64:ff9b:1::/48")
_V4 = ipaddress.IPv4Network
# Never a destination whatever ``is_global`` says of them on this Python.
_V4_NEVER = (
    _V4("0.0.0.0/8"),
    _V4("100.64.0.0/10"),  # carrier-grade NAT (shared address space)
    _V4("224.0.0.0/4"),  # multicast
    _V4("240.0.0.0/4"),  # reserved, and the limited broadcast address
)


class AddressRefused(Exception):
    """The host may not be sent to (``permanent``), or could not be resolved."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (see the module docstring), or ``None``."""
    if address in _V6("::/127"):
        return None  # :: and ::1 are IPv6's own unspecified and loopback addresses
    for network in _LOW_32_EMBEDDINGS:
        if address in network:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]  # the client, whose bits Teredo stores inverted
    return None


def _ipv4_public(address: ipaddress.IPv4Address) -> bool:
    return address.is_global and not any(address in net for net in _V4_NEVER)


def is_public(address: IPAddress) -> bool:
    """Whether a webhook may be sent to ``address`` without being named as allowed."""
    if isinstance(address, ipaddress.IPv4Address):
        return _ipv4_public(address)
    if address.scope_id:
        return False  # a zone index only means something on a local link
    if address in _NAT64_LOCAL:
        return False
    inner = embedded_ipv4(address)
    if inner is not None:
        return _ipv4_public(inner)
    return address.is_global and not (address.is_multicast or address.is_site_local)


@dataclass(frozen=True)
class AllowedHost:
    """One entry of ``NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS``: a host, and a port or any."""

    host: str
    port: int | None

    @classmethod
    def parse(cls, entry: str) -> AllowedHost:
        """``host``, ``host:port``, ``[v6]`` or ``[v6]:port``; a ``ValueError`` if not."""
        entry = entry.strip().lower()
        if entry.startswith("["):
            host, _, rest = entry[1:].partition("]")
            port = rest.removeprefix(":") if rest.startswith(":") else rest
        elif entry.count(":") == 1:
            host, port = entry.split(":")
        else:
            host, port = entry, ""
        if not host or (port and not port.isdigit()) or (port and not 0 < int(port) < 65536):
            raise ValueError(f"not a host or host:port: {entry!r}")
        return cls(host=host, port=int(port) if port else None)

    def matches(self, host: str, port: int) -> bool:
        return self.host == host.lower().strip("[]") and self.port in (None, port)


def parse_allowed_hosts(value: str) -> tuple[AllowedHost, ...]:
    """The comma-separated setting, parsed (empty entries ignored)."""
    return tuple(AllowedHost.parse(e) for e in value.split(",") if e.strip())


def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise AddressRefused(f"cannot resolve {host}", permanent=False) from exc
    found: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]))
        if address not in found:
            found.append(address)
    if not found:
        raise AddressRefused(f"cannot resolve {host}", permanent=False)
    return found


def pinned_address(
    host: str, port: int, *, allowed: tuple[AllowedHost, ...], allow_any: bool = False
) -> IPAddress:
    """The address to connect to for ``host``: resolved once, every address it resolves
    to checked; refused (permanently) if any is not public and the host is not allowed."""
    addresses = _resolve(host, port)
    if allow_any or any(entry.matches(host, port) for entry in allowed):
        return addresses[0]
    for address in addresses:
        if not is_public(address):
            raise AddressRefused(
                f"{host} resolves to a non-public address; webhooks may not target it",
                permanent=True,
            )
    return addresses[0]
