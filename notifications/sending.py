"""Sending one notice: the webhook body and its signature, the email, and the split of
errors into transient (retried) and permanent (given up) at this boundary (STYLE 7).

Nothing here writes the database; :mod:`notifications.tasks` records the outcome. No
message raised or logged here holds a secret: neither a signing secret, nor a URL's
path or query (Slack-style webhook URLs carry their token in the path), nor the
exception text of the HTTP client (which quotes the URL).
"""

from __future__ import annotations

import json
import smtplib
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import urllib3
from django.conf import settings
from django.core.mail import EmailMessage, get_connection
from requests.utils import DEFAULT_CA_BUNDLE_PATH

from notifications import public_addresses, signing

USER_AGENT = "gangway-notifications/1"


class SendError(Exception):
    """A send that did not succeed; ``permanent`` ones are not retried."""

    def __init__(self, message: str, *, permanent: bool, retry_after: float | None = None):
        super().__init__(message)
        self.message = message[:500]
        self.permanent = permanent
        self.retry_after = retry_after


def redact(url: str) -> str:
    """A URL as it may be shown and logged: scheme, host and port, never path or query."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}/…"


@dataclass(frozen=True)
class Notice:
    """What one delivery says: the payload fields plus its delivery id."""

    delivery_id: str
    payload: dict[str, Any]

    def body(self) -> bytes:
        """The webhook body: Slack-compatible (``text``) plus the structured fields."""
        data = {**self.payload, "delivery_id": self.delivery_id}
        return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()


def _connection_pool(scheme: str, host: str, port: int, address: str) -> urllib3.HTTPConnectionPool:
    """A pool that connects to ``address`` (the checked one) and nowhere else; for https
    it still sends ``host`` as SNI and verifies the certificate against it."""
    timeout = urllib3.Timeout(total=settings.NOTIFY_WEBHOOK_TIMEOUT_SECONDS)
    if scheme == "https":
        return urllib3.HTTPSConnectionPool(
            address,
            port,
            timeout=timeout,
            retries=False,
            cert_reqs="CERT_REQUIRED",
            ca_certs=DEFAULT_CA_BUNDLE_PATH,
            assert_hostname=host,
            server_hostname=host,
        )
    return urllib3.HTTPConnectionPool(address, port, timeout=timeout, retries=False)


def _retry_after(response: urllib3.BaseHTTPResponse) -> float | None:
    raw = response.headers.get("Retry-After", "")
    try:
        return min(float(raw), settings.NOTIFY_BACKOFF_CAP_SECONDS) if raw else None
    except ValueError:
        return None


def post_webhook(*, url: str, secret: str, notice: Notice) -> int:
    """POST the notice to ``url``, signed with ``secret``; returns the status code.

    The host is resolved once and checked (:mod:`notifications.public_addresses`); the request
    goes to that address, with the URL's host in ``Host`` (and SNI). Redirects are not
    followed (the signed body goes where it was configured to, only). Connection
    errors, timeouts, 5xx and 429 are transient; any other non-2xx is permanent.
    """
    shown = redact(url)
    parts = urlsplit(url)
    host = parts.hostname or ""
    scheme = parts.scheme.lower()
    try:
        port = parts.port or (443 if scheme == "https" else 80)
        address = public_addresses.pinned_address(
            host,
            port,
            allowed=public_addresses.parse_allowed_hosts(
                settings.NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS
            ),
            allow_any=settings.NOTIFY_ALLOW_PRIVATE_WEBHOOKS,
        )
    except ValueError as exc:
        raise SendError(f"{shown} is not a valid URL", permanent=True) from exc
    except public_addresses.AddressRefused as exc:
        raise SendError(exc.message, permanent=exc.permanent) from exc
    body = notice.body()
    timestamp = str(int(time.time()))
    default_port = port == (443 if scheme == "https" else 80)
    name = f"[{host}]" if ":" in host else host
    headers = {
        "Host": name if default_port else f"{name}:{port}",
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Gangway-Delivery": notice.delivery_id,
        "X-Gangway-Event": str(notice.payload.get("event", "")),
        "X-Gangway-Timestamp": timestamp,
        "X-Gangway-Signature": signing.signature(secret, timestamp, body),
    }
    target = parts.path or "/"
    if parts.query:
        target += f"?{parts.query}"
    pool = _connection_pool(scheme, host, port, str(address))
    try:
        response = pool.urlopen(
            "POST", target, body=body, headers=headers, redirect=False, preload_content=True
        )
    except urllib3.exceptions.NewConnectionError as exc:
        # (checked first: urllib3 makes it a kind of connect timeout.) Its text quotes
        # the request's path, which may hold a token: only class names are kept.
        cause = type(exc.__context__ or exc).__name__
        raise SendError(f"ConnectionError ({cause}) reaching {shown}", permanent=False) from exc
    except urllib3.exceptions.TimeoutError as exc:
        raise SendError(f"timed out waiting for {shown}", permanent=False) from exc
    except urllib3.exceptions.HTTPError as exc:
        cause = type(exc.__context__ or exc).__name__
        error = f"{type(exc).__name__} ({cause}) reaching {shown}"
        raise SendError(error, permanent=False) from exc
    finally:
        pool.close()
    code = response.status
    if 200 <= code < 300:
        return code
    if code == 429 or code >= 500:
        raise SendError(
            f"HTTP {code} from {shown}", permanent=False, retry_after=_retry_after(response)
        )
    raise SendError(f"HTTP {code} from {shown}; not retried", permanent=True)


def send_email(*, to: str, notice: Notice) -> None:
    """Send the notice by email through Django's backend (``EMAIL_*`` settings)."""
    payload = notice.payload
    lines = [str(payload.get("text", ""))]
    if payload.get("message"):
        lines += ["", str(payload["message"])]
    if payload.get("url"):
        lines += ["", str(payload["url"])]
    lines += [
        "",
        f"Delivery {notice.delivery_id}",
        f"Change what you are told of: {settings.PUBLIC_BASE_URL}/notifications/",
    ]
    message = EmailMessage(
        subject=f"[gangway] {payload.get('subject') or payload.get('text', '')}"[:200],
        body="\n".join(lines),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[to],
        headers={"X-Gangway-Delivery": notice.delivery_id},
        connection=get_connection(timeout=settings.EMAIL_TIMEOUT),
    )
    try:
        message.send()
    except smtplib.SMTPRecipientsRefused as exc:
        raise SendError("the mail server refused the recipient", permanent=True) from exc
    except smtplib.SMTPResponseException as exc:
        permanent = 500 <= exc.smtp_code < 600
        raise SendError(f"SMTP error {exc.smtp_code}", permanent=permanent) from exc
    except (smtplib.SMTPException, OSError) as exc:
        error = f"{type(exc).__name__} talking to the mail server"
        raise SendError(error, permanent=False) from exc
