"""A service's endpoint end to end: a service created through the API becomes Ready in
kubesim (KubeRay's RayService controller and simulated Serve) and answers through
``/serve/{tenant}/{service}/...`` via the gateway and kubesim's service proxy to its
serve service; invoke tokens, the public switch, counting and the refusals."""

from __future__ import annotations

import json
from typing import Any

from django.test import Client
from django.utils import timezone
from knox.models import AuthToken

from clusters.kinds.rayservice import endpoint_counts
from clusters.models import ClusterRequest, Service, ServiceToken
from tenants.models import AuditEvent
from tests.clusters.engine.conftest import kubesim, wait_for, worker
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION, queued_service

__all__ = ["kubesim", "worker"]

SERVICES = "/api/v1/tenants/acme/services/"
ENDPOINT = "/serve/acme/sd/"


def _body(response: Any) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def _bearer(secret: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}")


def _api_token(user: Any) -> str:
    return AuthToken.objects.create(user=user)[1]


def _queued_service(tenant: Any, owner: Any, name: str) -> ClusterRequest:
    """A second service of the tenant, queued and held by an admin (never admitted)."""
    return queued_service(
        tenant,
        owner,
        name,
        queue_reason="quota",
        held_at=timezone.now(),
        hold_reason="kept waiting for the test",
    )


def _ready_service(as_user: Any, bob: Any) -> ClusterRequest:
    api = as_user(bob)
    body = {"name": "sd", "flavor": "l4", "workers": 1, "serve_config": STABLE_DIFFUSION}
    created = api.post(SERVICES, body, format="json")
    assert created.status_code == 201, created.content
    row = ClusterRequest.objects.unscoped()
    wait_for(lambda: row.get(name="sd").state == "ready", timeout=120, what="the service ready")
    wait_for(
        lambda: Service.objects.get(request__name="sd").serve_endpoints >= 1,
        timeout=60,
        what="a serve endpoint",
    )
    return row.select_related("service", "tenant").get(name="sd")


def test_a_ready_service_answers_through_its_endpoint_for_tokens_only(
    worker: Any, kubesim: Any, as_user: Any, alice: Any, bob: Any, charlie: Any, vera: Any
) -> None:
    sd = _ready_service(as_user, bob)
    other = _queued_service(sd.tenant, bob, "other")

    # A member's API token: the request reaches Serve on the active cluster, body and
    # query intact, and the answer is streamed back.
    member = _bearer(_api_token(vera))
    answer = member.post(
        ENDPOINT + "imagine?prompt=a+cat", data=b'{"steps": 3}', content_type="application/json"
    )
    assert answer.status_code == 200, _body(answer)
    assert answer.streaming
    served = json.loads(_body(answer))
    assert served["simulated"] is True
    assert served["application"] == "stable_diffusion"
    assert served["method"] == "POST" and served["path"] == "/imagine"
    assert served["bytes"] == len(b'{"steps": 3}')
    assert served["rayCluster"] == Service.objects.get(pk=sd.pk).active_cluster
    assert "sandbox" in answer["Content-Security-Policy"]

    # Refusals: no token, an unknown one, another tenant's member, an unknown service.
    anonymous = Client().get(ENDPOINT)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "not_authenticated"
    assert _bearer("gws_not-a-real-token").get(ENDPOINT).status_code == 401
    assert _bearer("nonsense").get(ENDPOINT).status_code == 401
    assert _bearer(_api_token(charlie)).get(ENDPOINT).status_code == 404
    assert member.get("/serve/acme/nosuch/").status_code == 404
    assert member.get("/serve/globex/sd/").status_code == 404

    # An invoke token, made by the owner through the API: shown once, stored hashed,
    # good for its own service only.
    api = as_user(bob)
    made = api.post(SERVICES + "sd/tokens/", {"name": "frontend"}, format="json")
    assert made.status_code == 201, made.content
    secret = made.json()["token"]
    assert secret.startswith("gws_")
    stored = ServiceToken.objects.get(name="frontend")
    assert secret not in (stored.digest, stored.prefix) and secret.startswith(stored.prefix)
    listed = api.get(SERVICES + "sd/tokens/").json()["results"]
    assert [t["name"] for t in listed] == ["frontend"] and "token" not in listed[0]
    scoped = _bearer(secret)
    assert scoped.get(ENDPOINT + "x").status_code == 200
    assert ServiceToken.objects.get(pk=stored.pk).last_used_at is not None
    refused = scoped.get("/serve/acme/other/")
    assert refused.status_code == 403
    assert "another service" in refused.json()["error"]["message"]
    # ...and it is no API token.
    assert _bearer(secret).get(SERVICES).status_code == 401

    # A service that is not ready says why.
    own = api.post(SERVICES + "other/tokens/", {"name": "cron"}, format="json").json()["token"]
    waiting = _bearer(own).get("/serve/acme/other/")
    assert waiting.status_code == 503
    # (queued, or admitted and starting by now: the worker runs the queue meanwhile)
    assert waiting.json()["error"]["code"] == "not_ready"
    assert "its endpoint answers once it is ready" in waiting.json()["error"]["message"]
    assert waiting["Retry-After"]

    # Only the owner or an admin manages tokens; a viewer may not even list them.
    assert as_user(vera).get(SERVICES + "sd/tokens/").status_code == 403
    assert as_user(charlie).get(SERVICES + "sd/tokens/").status_code == 404

    # Revoked: refused at once.
    revoked = api.delete(SERVICES + f"sd/tokens/{stored.pk}/")
    assert revoked.status_code == 204
    assert scoped.get(ENDPOINT).status_code == 401
    assert api.delete(SERVICES + f"sd/tokens/{stored.pk}/").status_code == 404

    # Public: only a tenant admin switches it; then no token is needed.
    assert api.post(SERVICES + "sd/public/", {"public": True}, format="json").status_code == 403
    admin = as_user(alice)
    assert admin.post(SERVICES + "sd/public/", {"public": True}, format="json").json() == {
        "public": True
    }
    assert Client().get(ENDPOINT + "open").status_code == 200
    assert Client().get("/serve/acme/other/").status_code == 401  # still private
    admin.post(SERVICES + "sd/public/", {"public": False}, format="json")
    assert Client().get(ENDPOINT).status_code == 401

    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {
        "service.token_created",
        "service.token_revoked",
        "service.made_public",
        "service.made_private",
    } <= actions

    # Counted: the relayed requests (three answered 200 above), none of the refusals.
    detail = api.get(SERVICES + "sd/").json()
    assert detail["service_endpoint"]["requests"] == 3
    assert detail["service_endpoint"]["url"].endswith("/serve/acme/sd/")
    assert "Authorization: Bearer" in detail["service_endpoint"]["curl"]
    assert endpoint_counts.requests_total(Service.objects.get(pk=other.pk)) == 0
