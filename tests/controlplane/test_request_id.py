"""X-Request-ID: a caller's id is kept only when it is short and plain; the response
always echoes the id that the audit trail and the logs use."""

from __future__ import annotations

import re
from typing import Any

import pytest
from rest_framework.test import APIClient

from tenants.models import AuditEvent

GENERATED = re.compile(r"^[0-9a-f]{32}$")


@pytest.mark.parametrize("value", ["abc", "req-1.2_3", "A" * 64, "0b6c:span:1"])
def test_a_plain_request_id_is_kept_and_echoed(db: Any, value: str) -> None:
    response = APIClient().get("/healthz", HTTP_X_REQUEST_ID=value)
    assert response.status_code == 200
    assert response["X-Request-ID"] == value


@pytest.mark.parametrize(
    "value",
    [
        "",
        "A" * 65,
        "abc\n",  # a trailing newline once slipped past the pattern and broke the response
        "abc\r\nSet-Cookie: x=1",
        "two words",
        "id/with/slashes",
        "<script>",
        "naïve",
        "x" * 10_000,
    ],
)
def test_any_other_request_id_is_replaced(db: Any, value: str) -> None:
    response = APIClient().get("/healthz", HTTP_X_REQUEST_ID=value)
    assert response.status_code == 200
    assert GENERATED.match(response["X-Request-ID"])


def test_the_audit_row_carries_the_id_the_response_echoed(root: Any, as_user: Any) -> None:
    response = as_user(root).post(
        "/api/v1/flavors/",
        {
            "name": "a10",
            "gpu_product": "NVIDIA-A10",
            "gpus_per_node": 4,
            "cpu_per_node": 64,
            "memory_per_node_gib": 256,
        },
        format="json",
        HTTP_X_REQUEST_ID="bad id\n",
    )
    assert response.status_code == 201
    event = AuditEvent.objects.get(action="flavor.create")
    assert GENERATED.match(event.request_id)
    assert event.request_id == response["X-Request-ID"]
