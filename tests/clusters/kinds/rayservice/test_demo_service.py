"""``make run``'s demo service (``manage.py seed_demo_service``): requested for the demo
tenant after ``seed_demo``, once; it becomes Ready through the real loop and its serve
service answers (simulated Serve here; the real Serve app is tests/kubesim's
test_kubesim_realray)."""

from __future__ import annotations

import json
import urllib.request
from io import StringIO
from typing import Any

from django.core.management import call_command

from clusters.management.commands.seed_demo_service import NAME, TENANT
from clusters.models import ClusterRequest
from tests.clusters.engine.conftest import kubesim, wait_for, worker

__all__ = ["kubesim", "worker"]  # the engine tests' fixtures


def _row() -> ClusterRequest:
    return ClusterRequest.objects.unscoped().select_related("service").get(name=NAME)


def test_the_demo_service_is_requested_once_and_becomes_ready(worker: Any, kubesim: Any) -> None:
    call_command("seed_demo", stdout=StringIO())
    out = StringIO()
    call_command("seed_demo_service", stdout=out)
    assert f"Demo service {NAME!r} requested for {TENANT!r}" in out.getvalue()
    again = StringIO()
    call_command("seed_demo_service", stdout=again)
    assert "exists: left as it is" in again.getvalue()
    assert ClusterRequest.objects.unscoped().filter(name=NAME).count() == 1

    wait_for(lambda: _row().state == "ready", timeout=120, what="the demo service ready")
    row = _row()
    assert row.tenant.slug == TENANT and row.owner.username == "ada"
    assert row.flavor.name == "l4" and row.gpus == 1
    app = row.service.applications["text_to_image"]
    assert app["status"] == "RUNNING"
    assert set(app["deployments"]) == {"APIIngress", "StableDiffusionV2"}

    # Its serve service answers a request (through the API server's service proxy).
    url = (
        f"{kubesim.url}/api/v1/namespaces/{row.namespace}/services/"
        f"{NAME}-serve-svc:8000/proxy/imagine?prompt=cat"
    )
    request = urllib.request.Request(url, headers={"Authorization": "Bearer kubesim"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        answer = json.load(resp)
    assert answer["simulated"] is True and answer["application"] == "text_to_image"
