"""Access table of the clusters API (cluster requests, dry-run, manifests, queue, usage).
See ``tests/access/matrix.py`` for the vocabulary.

Routes on one cluster build their target in the ``kwargs`` builder: bob's dev cluster in
acme, in the state the action needs (ready to suspend or extend, suspended to resume).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from clusters.models import ClusterRequest
from tenants.models import GpuFlavor
from tests.access.matrix import Case, Route, everyone, members, platform_only

CLUSTERS = "api/v1/tenants/{tenant_slug}/clusters/"
ONE = CLUSTERS + "{name}/"


def _bobs(state: str, name: str = "bob-dev", **extra: Any) -> Any:
    def build(w: Any) -> dict[str, str]:
        now = timezone.now()
        ClusterRequest.objects.get_or_create(
            tenant=w.acme,
            name=name,
            defaults={
                "owner": w.actors["engineer"],
                "kind": "dev",
                "flavor": GpuFlavor.objects.get(name="l4"),
                "workers": 1,
                "gpus": 1,
                "state": state,
                "holds_gpus": state == "ready",
                "ttl_hours": 8,
                "admitted_at": now,
                "expires_at": now + timedelta(hours=8) if state == "ready" else None,
                **extra,
            },
        )
        return {"tenant_slug": "acme", "name": name}

    return build


READERS = members(viewer=200, engineer=200, admin=200, platform=200)

ROUTES = {
    CLUSTERS: Route(
        kwargs={"tenant_slug": "acme"},
        methods={
            "GET": Case(READERS),
            "POST": Case(
                members(viewer=403, engineer=201, admin=201, platform=201),
                body=lambda w: {"kind": "dev", "flavor": "l4", "workers": 1},
            ),
        },
    ),
    CLUSTERS + "dry-run/": Route(
        kwargs={"tenant_slug": "acme"},
        methods={
            "POST": Case(
                members(viewer=403, engineer=200, admin=200, platform=200),
                body=lambda w: {"kind": "dev", "flavor": "l4", "workers": 1},
            )
        },
    ),
    ONE: Route(
        methods={
            "GET": Case(READERS, kwargs=_bobs("ready")),
            "DELETE": Case(
                members(viewer=403, engineer=202, admin=202, platform=202), kwargs=_bobs("ready")
            ),
        },
    ),
    ONE + "manifests/": Route(methods={"GET": Case(READERS, kwargs=_bobs("ready"))}),
    ONE + "suspend/": Route(
        methods={
            "POST": Case(
                members(viewer=403, engineer=200, admin=200, platform=200), kwargs=_bobs("ready")
            )
        }
    ),
    ONE + "resume/": Route(
        methods={
            "POST": Case(
                members(viewer=403, engineer=200, admin=200, platform=200),
                kwargs=_bobs("suspended", "bob-paused"),
            )
        }
    ),
    ONE + "extend/": Route(
        methods={
            "POST": Case(
                members(viewer=403, engineer=200, admin=200, platform=200),
                kwargs=_bobs("ready"),
                body=lambda w: {"hours": 4},
            )
        }
    ),
    ONE + "keepalive/": Route(
        methods={
            "POST": Case(
                members(viewer=403, engineer=200, admin=200, platform=200), kwargs=_bobs("ready")
            )
        }
    ),
    # Queue controls are the tenant admins' (and platform admins').
    ONE + "priority/": Route(
        methods={
            "POST": Case(
                members(viewer=403, engineer=403, admin=200, platform=200),
                kwargs=_bobs("queued", "bob-waits"),
                body=lambda w: {"priority": 5, "reason": "demo on Friday"},
            )
        }
    ),
    ONE + "hold/": Route(
        methods={
            "POST": Case(
                members(viewer=403, engineer=403, admin=200, platform=200),
                kwargs=_bobs("queued", "bob-waits"),
                body=lambda w: {"reason": "the quota review first"},
            )
        }
    ),
    ONE + "release/": Route(
        methods={
            "POST": Case(
                members(viewer=403, engineer=403, admin=200, platform=200),
                kwargs=_bobs("queued", "bob-held", held_at=timezone.now(), hold_reason="wait"),
                body=lambda w: {"reason": "go ahead"},
            )
        }
    ),
    # Without a Kubernetes API the answer says so, in the log's message (200).
    ONE + "logs/": Route(methods={"GET": Case(READERS, kwargs=_bobs("ready"))}),
    # The proxy to a suspended cluster's Ray dashboard: every member is told it is not
    # ready (409) and forwarded nothing; the proxy's forwarding is in tests/clusters/live.
    # A tunnel is a WebSocket (tests/clusters/live/test_tunnels.py); a plain GET without
    # a port is refused: 403 for whoever may not manage the cluster, else 400.
    ONE + "tunnel/": Route(
        passthrough=True,
        methods={
            "GET": Case(
                members(viewer=403, engineer=400, admin=400, platform=400), kwargs=_bobs("ready")
            )
        },
    ),
    ONE + "ray/{path}": Route(
        passthrough=True,
        methods={
            "GET": Case(
                members(viewer=409, engineer=409, admin=409, platform=409),
                kwargs=lambda w: {**_bobs("suspended", "bob-paused")(w), "path": "api/version"},
            ),
            "POST": Case(
                members(viewer=403, engineer=409, admin=409, platform=409),
                kwargs=lambda w: {**_bobs("suspended", "bob-paused")(w), "path": "api/jobs/"},
                body=lambda w: {"entrypoint": "echo hi"},
            ),
        },
    ),
    "api/v1/tenants/{tenant_slug}/queue/": Route(
        kwargs={"tenant_slug": "acme"}, methods={"GET": Case(READERS)}
    ),
    "api/v1/tenants/{tenant_slug}/usage/": Route(
        kwargs={"tenant_slug": "acme"}, methods={"GET": Case(READERS)}
    ),
    # Money caps (clusters/api/cost_views.py): members read, admins set (docs/cost.md).
    "api/v1/tenants/{tenant_slug}/cost-caps/": Route(
        kwargs={"tenant_slug": "acme"},
        methods={
            "GET": Case(READERS),
            "PUT": Case(
                members(viewer=403, engineer=403, admin=200, platform=200),
                body=lambda w: {"soft_limit": "10", "hard_limit": "20"},
            ),
        },
    ),
    # Flavor prices: every signed-in user reads them, platform admins set them.
    "api/v1/platform/prices/": Route(
        methods={
            "GET": Case(everyone(200)),
            "POST": Case(
                platform_only(201), body=lambda w: {"flavor": "h100", "price_per_gpu_hour": "2"}
            ),
        }
    ),
    "api/v1/queue/": Route(methods={"GET": Case(platform_only(200))}),
    # The image allow-list, like the GPU catalogue: every signed-in user reads it.
    "api/v1/images/": Route(methods={"GET": Case(everyone(200))}),
}
