"""Reading the API server's answers: whole bodies, streamed watch lines, and a backend's
answer relayed through the service proxy."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import urllib3

from clusters.kube.errors import transport_error


class ProxiedResponse:
    """A backend's answer through the service proxy: status, headers and a body read in
    chunks (:meth:`chunks`), so a large or endless answer is relayed, never buffered."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response
        self.status = int(response.status)
        self.headers: dict[str, str] = {k.lower(): v for k, v in response.headers.items()}

    def chunks(self, size: int = 64 * 1024) -> Any:
        """The body, chunk by chunk; the connection goes back to the pool at the end."""
        finished = False
        try:
            yield from self._response.stream(size, decode_content=False)
            finished = True
        finally:
            self.close(finished=finished)

    def header_list(self, name: str) -> list[str]:
        """Every value of a header the backend may repeat (``Set-Cookie``), in order."""
        return list(self._response.headers.getlist(name))

    def read(self, limit: int) -> bytes:
        """At most ``limit`` bytes of the body (for answers the control plane reads itself);
        a connection that breaks meanwhile is a :class:`TransientKubeError`."""
        try:
            data = bytes(self._response.read(limit, decode_content=True) or b"")
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise transport_error(exc, what="read an answer through the service proxy") from exc
        finally:
            self.close(finished=False)
        return data

    def close(self, *, finished: bool = False) -> None:
        """Give the connection back to the pool when the body was read to its end; drop it
        otherwise, since unread bytes would be taken for the next answer on it."""
        if not finished:
            self._response.close()
        self._response.release_conn()


@dataclass(frozen=True)
class UpgradeTarget:
    """Where to open a WebSocket through the API server's service proxy: the ``ws(s)://``
    URL, the headers to send (the caller's and the API server's credentials) and the TLS
    context of the kubeconfig (``None`` for plain HTTP)."""

    url: str
    headers: dict[str, str]
    ssl: ssl.SSLContext | None


def read_body(response: Any, *, what: str) -> bytes:
    """The whole body of an answer (the client's raw response), read now. A connection
    that breaks while the body is on its way is transient, as one that breaks before it:
    the Kubernetes API suite's resets mid-body escaped every caller's ``except KubeError``
    as urllib3's ProtocolError."""
    # Not hasattr(response, "data"): that reads the body, outside the try.
    raw = response[0] if isinstance(response, tuple) else response
    try:
        return bytes(raw.data or b"")
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise transport_error(exc, what=what) from exc


def stream_lines(response: Any) -> Iterator[bytes]:
    """The newline-delimited documents of a streamed body, as they arrive."""
    pending = b""
    for chunk in response.stream(64 * 1024, decode_content=False):
        pending += chunk
        if b"\n" not in pending:
            continue
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


def proxy_path(namespace: str, service: str, port: str, path: str, query: str) -> str:
    """The service proxy's path (and query) for ``path`` of ``service:port``."""
    found = f"/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy/{path.lstrip('/')}"
    return f"{found}?{query}" if query else found


def tls_context(configuration: Any) -> ssl.SSLContext:
    """The TLS the REST client uses, for a connection opened outside it: the kubeconfig's
    CA, client certificate and verification settings."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
