"""Access table of the services API and pages (RayServices: request, list, detail,
upgrade, delete, dry-run). See ``tests/access/matrix.py`` for the vocabulary.

Routes on one service build their target in the ``kwargs`` builder: bob's queued service
in acme (a queued service can be read, upgraded and deleted without the Kubernetes API).
"""

from __future__ import annotations

from typing import Any

from clusters.models import Service
from tests.access.kind_routes import READERS, WRITERS, bobs_queued, collection_routes
from tests.access.matrix import Case, Route, members, statuses
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION

SERVICES = "api/v1/tenants/{tenant_slug}/services/"
ONE = SERVICES + "{name}/"
TENANT = "t/{slug}/"
BODY = {"flavor": "l4", "workers": 1, "serve_config": STABLE_DIFFUSION}

# bob's queued service in acme, with its Service row.
_bobs = bobs_queued(
    workload="service",
    name="bob-svc",
    details=lambda row: Service.objects.create(request=row, serve_config=STABLE_DIFFUSION),
)


def _page(w: Any) -> dict[str, str]:
    return {"slug": "acme", "name": _bobs(w)["name"]}


READ = statuses(anonymous=302, outsider=404, viewer=200, engineer=200, admin=200, platform=200)
ACT = {**members(viewer=403, engineer=302, admin=302, platform=302), "anonymous": 302}

ROUTES = {
    **collection_routes(SERVICES, BODY),
    ONE: Route(
        methods={
            "GET": Case(READERS, kwargs=_bobs),
            "PATCH": Case(WRITERS, kwargs=_bobs, body=lambda w: {"serve_config": STABLE_DIFFUSION}),
            "DELETE": Case(
                members(viewer=403, engineer=202, admin=202, platform=202), kwargs=_bobs
            ),
        },
    ),
    TENANT + "services/": Route(session=True, kwargs={"slug": "acme"}, methods={"GET": Case(READ)}),
    TENANT + "services/new/": Route(
        session=True,
        kwargs={"slug": "acme"},
        methods={
            "GET": Case({**READ, "viewer": 403}),
            # A valid form redirects to the new service's page.
            "POST": Case(
                ACT,
                body=lambda w: {
                    **BODY,
                    "kind": "dev",
                    "name": "new-svc",
                    "upgrade_type": "NewCluster",
                },
            ),
        },
    ),
    TENANT + "services/new/verdict/": Route(
        session=True,
        kwargs={"slug": "acme"},
        methods={
            "POST": Case(
                {**READ, "viewer": 403},
                body=lambda w: {
                    **BODY,
                    "kind": "dev",
                    "name": "new-svc",
                    "upgrade_type": "NewCluster",
                },
            )
        },
    ),
    TENANT + "services/{name}/": Route(session=True, methods={"GET": Case(READ, kwargs=_page)}),
    TENANT + "services/{name}/log/": Route(session=True, methods={"GET": Case(READ, kwargs=_page)}),
    TENANT + "services/{name}/manifests.yaml": Route(
        session=True, methods={"GET": Case(READ, kwargs=_page)}
    ),
    TENANT + "services/{name}/{action}/": Route(
        session=True,
        methods={"POST": Case(ACT, kwargs=lambda w: {**_page(w), "action": "delete"})},
    ),
}
