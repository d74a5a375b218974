"""Which addresses a webhook may reach, and that it reaches only the address checked.

The table runs each form through the real resolver (``getaddrinfo`` accepts the odd
IPv4 spellings, as the HTTP client would), then through the real send path to a real
receiver on loopback: a refused form never reaches it. The rebinding tests answer
one address when the host is checked and another afterwards, and show where the
connection went.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from notifications import public_addresses, sending
from notifications.sending import Notice, SendError, post_webhook

# Teredo stores its client's IPv4 address inverted in the last 32 bits.
_TEREDO = "2001:0:4136:e378:8000:63bf:"

REFUSED = [
    # IPv4: loopback, private, link-local (the metadata service), CGNAT, multicast,
    # broadcast, unspecified, documentation, benchmarking, reserved.
    "127.0.0.1",
    "127.1.2.3",
    "10.0.0.1",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "100.127.255.254",
    "224.0.0.1",
    "239.255.255.250",
    "255.255.255.255",
    "0.0.0.0",
    "192.0.2.1",
    "198.51.100.1",
    "203.0.113.1",
    "198.18.0.1",
    "240.0.0.1",
    # The same, spelled as inet_aton (and so getaddrinfo) still reads them.
    "2130706433",
    "0x7f.1",
    "0177.0.0.1",
    "0x7f000001",
    "127.1",
    "017700000001",
    "0xa9.0xfe.0xa9.0xfe",
    # IPv6: loopback, unspecified, unique local, link-local, multicast, site-local,
    # documentation.
    "::1",
    "::",
    "fc00::1",
    "fd12:3456::1",
    "fe80::1",
    "ff02::1",
    "ff0e::1",
    "fec0::1",
    "2001:db8::1",
    # IPv4 inside IPv6, with an internal IPv4 inside (the five first).
    "::127.0.0.1",
    "::ffff:0:7f00:1",
    "64:ff9b::7f00:1",
    "64:ff9b::a9fe:a9fe",
    "::169.254.169.254",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::ffff:0:a9fe:a9fe",
    "::10.1.2.3",
    "64:ff9b::a00:1",
    "64:ff9b:1::a9fe:a9fe",
    # NAT64's local-use prefix is refused whatever it carries.
    "64:ff9b:1:808:8:800::",
    "2002:7f00:1::1",
    "2002:a9fe:a9fe::",
    "2002:a00:1::",
    _TEREDO + "80ff:fffe",  # client 127.0.0.1
    _TEREDO + "f5ff:fffe",  # client 10.0.0.1
    _TEREDO + "5601:5601",  # client 169.254.169.254
    # A name that resolves to loopback.
    "localhost",
]

PUBLIC = [
    ("8.8.8.8", "8.8.8.8"),
    ("1.1.1.1", "1.1.1.1"),
    ("134744072", "8.8.8.8"),
    ("0x8.0x8.0x8.0x8", "8.8.8.8"),
    ("2606:4700:4700::1111", "2606:4700:4700::1111"),
    # IPv4 inside IPv6, with a public IPv4 inside.
    ("::ffff:8.8.8.8", "::ffff:8.8.8.8"),
    ("::ffff:0:808:808", "::ffff:0:808:808"),
    ("::8.8.8.8", "::8.8.8.8"),
    ("64:ff9b::808:808", "64:ff9b::808:808"),
    ("2002:808:808::1", "2002:808:808::1"),
    (_TEREDO + "f7f7:f7f7", _TEREDO + "f7f7:f7f7"),  # client 8.8.8.8
]


@pytest.mark.parametrize("host", REFUSED)
def test_a_non_public_address_is_refused(host: str) -> None:
    with pytest.raises(public_addresses.AddressRefused, match="non-public") as refused:
        public_addresses.pinned_address(host, 443, allowed=())
    assert refused.value.permanent


@pytest.mark.parametrize(("host", "pinned"), PUBLIC)
def test_a_public_address_is_pinned(host: str, pinned: str) -> None:
    assert public_addresses.pinned_address(host, 443, allowed=()) == ipaddress.ip_address(pinned)


def test_the_table_is_large_enough_and_unwraps_every_embedding() -> None:
    assert len(REFUSED) + len(PUBLIC) >= 40
    v6 = ipaddress.IPv6Address
    for form, inner in [
        ("::ffff:127.0.0.1", "127.0.0.1"),
        ("::ffff:0:7f00:1", "127.0.0.1"),
        ("::127.0.0.1", "127.0.0.1"),
        ("64:ff9b::a9fe:a9fe", "169.254.169.254"),
        ("2002:a9fe:a9fe::", "169.254.169.254"),
        (_TEREDO + "5601:5601", "169.254.169.254"),
    ]:
        assert public_addresses.embedded_ipv4(v6(form)) == ipaddress.IPv4Address(inner)
    assert public_addresses.embedded_ipv4(v6("::1")) is None
    assert public_addresses.embedded_ipv4(v6("2606:4700:4700::1111")) is None


def test_any_private_answer_among_several_refuses_the_host(monkeypatch: Any) -> None:
    real = socket.getaddrinfo

    def resolver(host: str, *args: Any, **kwargs: Any) -> Any:
        if host == "mixed.example":
            return [*real("8.8.8.8", *args, **kwargs), *real("10.0.0.7", *args, **kwargs)]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    with pytest.raises(public_addresses.AddressRefused, match="non-public"):
        public_addresses.pinned_address("mixed.example", 443, allowed=())


def test_the_allow_list_names_hosts_and_ports() -> None:
    allowed = public_addresses.parse_allowed_hosts(" 127.0.0.1:8125, Receiver.Internal,[::1]:9000,")
    assert [(a.host, a.port) for a in allowed] == [
        ("127.0.0.1", 8125),
        ("receiver.internal", None),
        ("::1", 9000),
    ]
    pin = public_addresses.pinned_address
    assert pin("127.0.0.1", 8125, allowed=allowed) == ipaddress.ip_address("127.0.0.1")
    assert pin("::1", 9000, allowed=allowed) == ipaddress.ip_address("::1")
    for host, port in [("127.0.0.1", 8126), ("localhost", 8125), ("::1", 9001)]:
        with pytest.raises(public_addresses.AddressRefused):
            pin(host, port, allowed=allowed)
    for bad in ["127.0.0.1:http", "host:0", ":8125", "[::1]:99999"]:
        with pytest.raises(ValueError):
            public_addresses.parse_allowed_hosts(bad)


# --- The send path, against real servers on loopback -----------------------------------


class Server:
    """An HTTP server bound to one loopback address that records what reaches it."""

    def __init__(self, address: str, port: int = 0, status: int = 200) -> None:
        self.requests: list[tuple[str, str]] = []  # (path, Host header)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.requests.append((self.path, self.headers["Host"]))
                self.send_response(status)
                self.send_header("Location", "http://127.0.0.1:9/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer((address, port), Handler)
        self.port = self.httpd.server_port
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def loopback_server() -> Iterator[Server]:
    server = Server("127.0.0.1")
    yield server
    server.close()


def _notice() -> Notice:
    return Notice(delivery_id="d-1", payload={"event": "test", "text": "hi"})


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "[::ffff:127.0.0.1]", "[::127.0.0.1]", "2130706433", "localhost"]
)
def test_a_webhook_to_an_internal_form_is_never_sent(
    settings: Any, loopback_server: Server, host: str
) -> None:
    settings.NOTIFY_ALLOW_PRIVATE_WEBHOOKS = False
    settings.NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS = ""
    with pytest.raises(SendError, match="non-public") as refused:
        post_webhook(url=f"http://{host}:{loopback_server.port}/h", secret="s", notice=_notice())
    assert refused.value.permanent
    assert loopback_server.requests == []


def test_a_named_private_host_is_sent_to(settings: Any, loopback_server: Server) -> None:
    settings.NOTIFY_ALLOW_PRIVATE_WEBHOOKS = False
    settings.NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS = f"127.0.0.1:{loopback_server.port}"
    url = f"http://127.0.0.1:{loopback_server.port}/h?x=1"
    assert post_webhook(url=url, secret="s", notice=_notice()) == 200
    assert loopback_server.requests == [("/h?x=1", f"127.0.0.1:{loopback_server.port}")]


def test_a_redirect_is_not_followed(settings: Any) -> None:
    settings.NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS = "127.0.0.1"
    redirecting = Server("127.0.0.1", status=307)
    try:
        with pytest.raises(SendError, match="HTTP 307") as failed:
            post_webhook(url=f"http://127.0.0.1:{redirecting.port}/h", secret="s", notice=_notice())
        assert failed.value.permanent
        assert len(redirecting.requests) == 1
    finally:
        redirecting.close()


def test_a_rebound_name_still_reaches_only_the_checked_address(
    settings: Any, monkeypatch: Any
) -> None:
    """The name answers 127.0.0.1 when checked and 127.0.0.2 from then on: the webhook
    goes to 127.0.0.1 (with the name in Host), and the second server sees nothing."""
    checked = Server("127.0.0.1")
    rebound = Server("127.0.0.2", port=checked.port)
    real = socket.getaddrinfo
    asked: list[str] = []

    def resolver(host: str, *args: Any, **kwargs: Any) -> Any:
        if host != "hooks.example":
            return real(host, *args, **kwargs)
        asked.append(host)
        return real("127.0.0.1" if len(asked) == 1 else "127.0.0.2", *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    settings.NOTIFY_ALLOW_PRIVATE_WEBHOOKS = False
    settings.NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS = "hooks.example"
    try:
        for _ in range(2):
            asked.clear()
            url = f"http://hooks.example:{checked.port}/h"
            assert post_webhook(url=url, secret="s", notice=_notice()) == 200
        assert checked.requests == [("/h", f"hooks.example:{checked.port}")] * 2
        assert rebound.requests == []
    finally:
        checked.close()
        rebound.close()


def _certificate(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for ``name`` and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.mark.parametrize(("served", "sent"), [("hooks.example", True), ("evil.example", False)])
def test_https_to_a_pinned_address_sends_the_name_as_sni_and_verifies_it(
    settings: Any, monkeypatch: Any, tmp_path: Path, served: str, sent: bool
) -> None:
    """The connection goes to the checked IP, yet TLS still speaks to ``hooks.example``:
    the server sees it as SNI, and a certificate for any other name is refused."""
    cert, key = _certificate(tmp_path, served)
    server = Server("127.0.0.1")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    names: list[str | None] = []
    context.sni_callback = lambda _sock, name, _ctx: names.append(name)  # type: ignore[assignment,misc,return-value]
    server.httpd.socket = context.wrap_socket(server.httpd.socket, server_side=True)
    real = socket.getaddrinfo

    def resolver(host: str, *args: Any, **kwargs: Any) -> Any:
        return real("127.0.0.1" if host == "hooks.example" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    monkeypatch.setattr(sending, "DEFAULT_CA_BUNDLE_PATH", str(cert))
    settings.NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS = "hooks.example"
    url = f"https://hooks.example:{server.port}/h"
    try:
        if sent:
            assert post_webhook(url=url, secret="s", notice=_notice()) == 200
            assert server.requests == [("/h", f"hooks.example:{server.port}")]
        else:
            with pytest.raises(SendError, match="SSLError"):
                post_webhook(url=url, secret="s", notice=_notice())
            assert server.requests == []
        assert names and set(names) == {"hooks.example"}
    finally:
        server.close()
