"""/readyz checks the database, the broker and the Kubernetes API, and names what fails."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubesim import KubeSim


@pytest.fixture
def sim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    server = KubeSim(port=0).start()
    server.write_kubeconfig(str(tmp_path / "kubeconfig"))
    settings.KUBECONFIG = str(tmp_path / "kubeconfig")
    yield server
    server.stop()


@pytest.mark.django_db
def test_ready_when_database_broker_and_kubernetes_answer(client: Any, sim: KubeSim) -> None:
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert {name for name, check in body["checks"].items() if check["ok"]} == {
        "database",
        "broker",
        "kubernetes",
    }


@pytest.mark.django_db
def test_not_ready_names_the_kubernetes_api_when_it_is_down(client: Any, sim: KubeSim) -> None:
    sim.stop()
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 503
    assert body["checks"]["kubernetes"]["ok"] is False
    assert "cannot reach" in body["checks"]["kubernetes"]["error"]
    assert body["checks"]["database"]["ok"] is True
    sim.start()


@pytest.mark.django_db
def test_not_ready_names_the_broker_when_it_is_down(
    client: Any, sim: KubeSim, settings: Any
) -> None:
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 503
    assert body["checks"]["broker"]["ok"] is False
    assert body["checks"]["kubernetes"]["ok"] is True
