"""A light keep-alive HTTP client for the benchmarks' load threads."""

from __future__ import annotations

from typing import Any


class HttpResponse:
    """What the benchmarks read of an answer: its status, URL, method and body."""

    def __init__(self, method: str, url: str, status_code: int, body: bytes) -> None:
        self.method = method
        self.url = url
        self.status_code = status_code
        self.body = body

    @property
    def text(self) -> str:
        return self.body.decode(errors="replace")

    def json(self) -> Any:
        import json

        return json.loads(self.body)


class HttpSession:
    """One keep-alive HTTP/1.1 connection through ``http.client`` (opened again when the
    server closes it, as gunicorn's sync workers do after each answer).

    ``requests`` builds each request through several layers of Python (hooks, cookie
    jars, adapters, urllib3's pool): with 8 client threads in the benchmark's process,
    that was CPU the server's processes on the same small machine needed. ``elapsed`` is
    the time to the status line and headers, as ``requests`` measured it. ``headers``
    go with every request; a call may add its own.
    """

    def __init__(self, headers: dict[str, str] | None = None) -> None:
        self.headers = {**(headers or {}), "Connection": "keep-alive"}
        self.connection: Any = None
        self.elapsed = 0.0

    def request(
        self, method: str, url: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> HttpResponse:
        import http.client
        import json
        import time
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        if self.connection is None:
            self.connection = http.client.HTTPConnection(
                parts.hostname or "127.0.0.1", parts.port, timeout=60
            )
        sent = {**self.headers, **(headers or {})}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        start = time.perf_counter()
        self.connection.request(method, path, body=payload, headers=sent)
        answer = self.connection.getresponse()
        self.elapsed = time.perf_counter() - start
        data = answer.read()
        if answer.will_close:
            self.close()
        return HttpResponse(method, url, answer.status, data)

    def get(self, url: str, headers: dict[str, str] | None = None) -> HttpResponse:
        return self.request("GET", url, headers=headers)

    def post(self, url: str, json: Any, headers: dict[str, str] | None = None) -> HttpResponse:
        return self.request("POST", url, json, headers)

    def delete(self, url: str, headers: dict[str, str] | None = None) -> HttpResponse:
        return self.request("DELETE", url, headers=headers)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None
