"""Single sign-on from a terminal: the OAuth 2.0 device authorization grant (RFC 8628).

The server says whether SSO is on at ``GET /api/v1/auth/sso/`` (no sign-in needed):
``{"enabled": false}``, or the identity provider's endpoints and the public client id
the CLI uses. A server without that endpoint (a 404) has no SSO. The flow: ask the
provider for a device code, show the user where to approve it, then poll the token
endpoint at the interval it asks for until it answers with tokens or a final error.
Tokens are refreshed with the refresh-token grant when they expire.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests

from gangway_cli import exitcodes
from gangway_cli.errors import CliError

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
TIMEOUT = 15.0
# RFC 8628 3.5: without an interval the client waits 5 s; slow_down adds 5 s for good.
DEFAULT_INTERVAL = 5
SLOW_DOWN_STEP = 5


@dataclass(frozen=True)
class SsoConfig:
    """What ``GET /api/v1/auth/sso/`` says when SSO is enabled."""

    issuer: str
    client_id: str
    device_authorization_endpoint: str
    token_endpoint: str
    scope: str
    revocation_endpoint: str = ""


@dataclass(frozen=True)
class DeviceCode:
    """The provider's answer to the device authorization request (RFC 8628 3.2)."""

    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str
    expires_in: int
    interval: int


def discover(session: requests.Session, server: str) -> SsoConfig | None:
    """The server's SSO settings, or None when it has none (disabled, or no endpoint)."""
    try:
        response = session.get(f"{server}/api/v1/auth/sso/", timeout=TIMEOUT)
    except requests.RequestException:
        return None
    if response.status_code != 200:
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict) or not body.get("enabled"):
        return None
    if not (body.get("client_id") and body.get("device_authorization_endpoint")):
        raise CliError(
            "the server signs people in through its identity provider, but offers the "
            "command line no device flow (OIDC_CLI_CLIENT_ID is unset, or the provider "
            "cannot be reached)",
            hint="sign in with --username if you have a gangway password, or tell the "
            "platform team",
        )
    try:
        return SsoConfig(
            issuer=str(body["issuer"]),
            client_id=str(body["client_id"]),
            device_authorization_endpoint=str(body["device_authorization_endpoint"]),
            token_endpoint=str(body["token_endpoint"]),
            scope=str(body.get("scope", "openid")),
            revocation_endpoint=str(body.get("revocation_endpoint") or ""),
        )
    except KeyError as exc:
        raise CliError(
            f"the server's SSO settings lack {exc.args[0]}",
            hint="sign in with a username and password (--username), or tell the platform team",
        ) from None


def _post_form(url: str, data: dict[str, str]) -> tuple[int, dict[str, Any]]:
    try:
        response = requests.post(
            url, data=data, headers={"Accept": "application/json"}, timeout=TIMEOUT
        )
    except requests.RequestException as exc:
        raise CliError(
            f"cannot reach the identity provider at {url}: {exc}",
            hint="check your network, or sign in with a username and password (--username)",
            code=exitcodes.UNREACHABLE,
        ) from None
    try:
        body = response.json()
    except ValueError:
        body = {}
    return response.status_code, body if isinstance(body, dict) else {}


def start(config: SsoConfig) -> DeviceCode:
    """Ask the provider for a device code and the URL where the user approves it."""
    status, body = _post_form(
        config.device_authorization_endpoint,
        {"client_id": config.client_id, "scope": config.scope},
    )
    if status != 200 or "device_code" not in body:
        reason = body.get("error_description") or body.get("error") or f"HTTP {status}"
        raise CliError(
            f"the identity provider refused to start a sign-in: {reason}",
            hint="tell the platform team (the CLI's client may not allow the device flow)",
            code=exitcodes.AUTH,
        )
    uri = str(body.get("verification_uri") or body.get("verification_url") or "")
    return DeviceCode(
        device_code=str(body["device_code"]),
        user_code=str(body.get("user_code", "")),
        verification_uri=uri,
        verification_uri_complete=str(body.get("verification_uri_complete") or uri),
        expires_in=int(body.get("expires_in") or 600),
        interval=int(body.get("interval") or DEFAULT_INTERVAL),
    )


def _tokens(body: dict[str, Any], now: float) -> dict[str, Any]:
    """The credential the config keeps from a token answer."""
    expires_in = body.get("expires_in")
    return {
        "access_token": str(body["access_token"]),
        "refresh_token": body.get("refresh_token"),
        "expires_at": now + float(expires_in) if expires_in else None,
    }


def poll(
    config: SsoConfig,
    device: DeviceCode,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """Poll the token endpoint until the user approved (the tokens), refused, or the code
    expired (a :class:`CliError`). Waits ``interval`` between polls and 5 s more after
    each ``slow_down``, as RFC 8628 3.5 requires."""
    interval = max(device.interval, 1)
    deadline = clock() + device.expires_in
    while True:
        sleep(interval)
        if clock() > deadline:
            break
        status, body = _post_form(
            config.token_endpoint,
            {
                "grant_type": DEVICE_GRANT,
                "device_code": device.device_code,
                "client_id": config.client_id,
            },
        )
        if status == 200 and "access_token" in body:
            return _tokens(body, clock())
        error = str(body.get("error", ""))
        if error == "authorization_pending":
            continue
        if error == "slow_down":
            interval += SLOW_DOWN_STEP
            continue
        if error == "access_denied":
            raise CliError(
                "the sign-in was refused at the identity provider",
                hint="run `gangway login --sso` again and approve the request",
                code=exitcodes.AUTH,
            )
        if error == "expired_token":
            break
        reason = body.get("error_description") or error or f"HTTP {status}"
        raise CliError(
            f"the identity provider refused the sign-in: {reason}",
            hint="run `gangway login --sso` again",
            code=exitcodes.AUTH,
        )
    raise CliError(
        "the sign-in code expired before it was approved",
        hint="run `gangway login --sso` again and approve it sooner",
        code=exitcodes.AUTH,
    )


def refresh(
    token_endpoint: str,
    client_id: str,
    refresh_token: str,
    *,
    clock: Callable[[], float] = time.time,
) -> dict[str, Any] | None:
    """New tokens for ``refresh_token`` (the old refresh token is kept when the provider
    does not rotate it), or None when the provider will not refresh any more."""
    status, body = _post_form(
        token_endpoint,
        {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id},
    )
    if status != 200 or "access_token" not in body:
        return None
    tokens = _tokens(body, clock())
    tokens["refresh_token"] = tokens["refresh_token"] or refresh_token
    return tokens


def revoke(revocation_endpoint: str, client_id: str, refresh_token: str) -> bool:
    """Revoke a refresh token at the provider (RFC 7009); whether it said so."""
    status, _ = _post_form(
        revocation_endpoint,
        {"token": refresh_token, "token_type_hint": "refresh_token", "client_id": client_id},
    )
    return status == 200
