"""The SSO device flow (RFC 8628) and token refresh against a real HTTP server on
loopback that speaks the protocol: what the CLI sends, how it paces its polls, and how
it ends on each of the provider's answers. No mocks: the CLI's own HTTP code runs."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import pytest
import requests

from gangway_cli import exitcodes, sso
from gangway_cli.client import ApiClient
from gangway_cli.errors import CliError


class Provider:
    """An identity provider (and a gangway API with one endpoint) on 127.0.0.1.

    ``answers`` is the token endpoint's script for the device grant: each poll takes the
    next error code ("authorization_pending", "slow_down", ...) or "ok" for tokens.
    """

    def __init__(self) -> None:
        self.answers: list[str] = []
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.sso: dict[str, Any] | None = None
        self.valid_access = "access-2"
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                if self.path == "/api/v1/auth/sso/" and provider.sso is not None:
                    self._send(200, provider.sso)
                elif self.path == "/api/v1/users/me/":
                    if self.headers.get("Authorization") == f"Bearer {provider.valid_access}":
                        self._send(200, {"username": "eli", "memberships": []})
                    else:
                        self._send(
                            401,
                            {
                                "error": {
                                    "code": "authentication_failed",
                                    "message": "Invalid token.",
                                }
                            },
                        )
                else:
                    self._send(404, {"error": {"code": "not_found", "message": "Not found."}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                provider.seen.append((self.path, form))
                if self.path == "/device":
                    self._send(
                        200,
                        {
                            "device_code": "dev-123",
                            "user_code": "WDJB-MJHT",
                            "verification_uri": f"{provider.url}/activate",
                            "verification_uri_complete": f"{provider.url}/activate?code=WDJB-MJHT",
                            "expires_in": 600,
                            "interval": 2,
                        },
                    )
                elif form.get("grant_type") == "refresh_token":
                    if form.get("refresh_token") == "refresh-1":
                        self._send(
                            200,
                            {
                                "access_token": "access-2",
                                "expires_in": 3600,
                                "token_type": "Bearer",
                            },
                        )
                    else:
                        self._send(400, {"error": "invalid_grant"})
                else:
                    answer = provider.answers.pop(0) if provider.answers else "expired_token"
                    if answer == "ok":
                        self._send(
                            200,
                            {
                                "access_token": "access-1",
                                "refresh_token": "refresh-1",
                                "expires_in": 3600,
                                "token_type": "Bearer",
                            },
                        )
                    else:
                        self._send(400, {"error": answer})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.config = sso.SsoConfig(
            issuer=self.url,
            client_id="gangway-cli",
            device_authorization_endpoint=f"{self.url}/device",
            token_endpoint=f"{self.url}/token",
            scope="openid profile offline_access",
        )


@pytest.fixture
def provider() -> Iterator[Provider]:
    idp = Provider()
    thread = threading.Thread(target=idp.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield idp
    finally:
        idp.server.shutdown()
        idp.server.server_close()


class FakeTime:
    """A clock that moves only when the poller sleeps, so the test takes no time."""

    def __init__(self) -> None:
        self.now = 1_000_000.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


def test_pending_then_slow_down_then_approved(provider: Provider) -> None:
    provider.answers = ["authorization_pending", "slow_down", "authorization_pending", "ok"]
    device = sso.start(provider.config)
    assert device.user_code == "WDJB-MJHT" and device.interval == 2
    assert device.verification_uri_complete.endswith("?code=WDJB-MJHT")
    path, form = provider.seen[0]
    assert path == "/device"
    assert form == {"client_id": "gangway-cli", "scope": "openid profile offline_access"}

    time = FakeTime()
    tokens = sso.poll(provider.config, device, sleep=time.sleep, clock=time.clock)
    # The interval first, then 5 s more for good after slow_down (RFC 8628 3.5).
    assert time.sleeps == [2, 2, 7, 7]
    assert tokens["access_token"] == "access-1" and tokens["refresh_token"] == "refresh-1"
    assert tokens["expires_at"] == time.now + 3600
    polls = [form for path, form in provider.seen if path == "/token"]
    assert len(polls) == 4
    assert polls[0] == {
        "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
        "device_code": "dev-123",
        "client_id": "gangway-cli",
    }


@pytest.mark.parametrize(
    ("answers", "words"),
    [
        (["authorization_pending", "access_denied"], "refused at the identity provider"),
        (["expired_token"], "expired before it was approved"),
        (["invalid_client"], "refused the sign-in: invalid_client"),
    ],
)
def test_a_final_answer_ends_the_flow(provider: Provider, answers: list[str], words: str) -> None:
    provider.answers = list(answers)
    time = FakeTime()
    with pytest.raises(CliError) as failed:
        sso.poll(provider.config, sso.start(provider.config), sleep=time.sleep, clock=time.clock)
    assert words in failed.value.message
    assert failed.value.code == exitcodes.AUTH and "gangway login" in failed.value.hint
    assert len([p for p, _ in provider.seen if p == "/token"]) == len(answers)


def test_the_code_expires_while_nobody_approves(provider: Provider) -> None:
    provider.answers = ["authorization_pending"] * 100
    device = sso.DeviceCode("dev-123", "WDJB-MJHT", "u", "u", expires_in=5, interval=2)
    time = FakeTime()
    with pytest.raises(CliError, match="expired"):
        sso.poll(provider.config, device, sleep=time.sleep, clock=time.clock)
    # Polls at 2 s and 4 s; at 6 s the code has expired and it stops without asking.
    assert len([p for p, _ in provider.seen if p == "/token"]) == 2


def test_discovery(provider: Provider) -> None:
    session = requests.Session()
    assert sso.discover(session, provider.url) is None  # the endpoint 404s: no SSO
    provider.sso = {"enabled": False}
    assert sso.discover(session, provider.url) is None
    provider.sso = {
        "enabled": True,
        "issuer": provider.url,
        "client_id": "gangway-cli",
        "device_authorization_endpoint": f"{provider.url}/device",
        "token_endpoint": f"{provider.url}/token",
        "scope": "openid",
    }
    found = sso.discover(session, provider.url)
    assert found is not None and found.client_id == "gangway-cli"


def test_an_expired_access_token_is_refreshed_and_kept(provider: Provider) -> None:
    saved: list[dict[str, Any]] = []
    auth = {
        "kind": "oidc",
        "access_token": "access-1",  # the API refuses it (expired or revoked there)
        "refresh_token": "refresh-1",
        "expires_at": None,
        "client_id": "gangway-cli",
        "token_endpoint": f"{provider.url}/token",
    }
    client = ApiClient(provider.url, auth, save_auth=saved.append)
    assert client.get("/api/v1/users/me/")["username"] == "eli"
    assert saved and saved[-1]["access_token"] == "access-2"
    assert saved[-1]["refresh_token"] == "refresh-1"  # not rotated: the old one is kept
    (refresh,) = [form for _, form in provider.seen if form.get("grant_type") == "refresh_token"]
    assert refresh == {
        "grant_type": "refresh_token",
        "refresh_token": "refresh-1",
        "client_id": "gangway-cli",
    }


def test_a_refused_refresh_says_to_sign_in_again(provider: Provider) -> None:
    auth = {
        "kind": "oidc",
        "access_token": "stale",
        "refresh_token": "revoked",
        "expires_at": 1.0,  # long expired: refreshed before the request, refused
        "client_id": "gangway-cli",
        "token_endpoint": f"{provider.url}/token",
    }
    with pytest.raises(CliError) as failed:
        ApiClient(provider.url, auth).get("/api/v1/users/me/")
    assert failed.value.code == exitcodes.AUTH
    assert "gangway login" in failed.value.hint
