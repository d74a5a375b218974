"""What a delivery sends and shows (notifications.sending): the webhook body, and a
target URL as pages and logs may show it, never its path or query (they may hold a
token)."""

from __future__ import annotations

import json

from notifications.sending import Notice, redact


def test_redact_keeps_scheme_host_and_port_only() -> None:
    assert redact("https://hooks.example.com/services/T0/B0/secret?x=1") == (
        "https://hooks.example.com/…"
    )
    assert redact("http://10.0.0.5:8080/hook") == "http://10.0.0.5:8080/…"
    assert redact("not a url") == "://?/…"


def test_the_body_is_the_payload_with_its_delivery_id_compact_and_sorted() -> None:
    notice = Notice(delivery_id="d-1", payload={"text": "Cluster x is ready.", "event": "x"})
    body = notice.body()
    assert json.loads(body) == {"text": "Cluster x is ready.", "event": "x", "delivery_id": "d-1"}
    assert body == b'{"delivery_id":"d-1","event":"x","text":"Cluster x is ready."}'
