"""Access table of the services API and pages (RayServices: request, list, detail,
upgrade, delete, dry-run). See ``tests/access/matrix.py`` for the vocabulary.

Routes on one service build their target in the ``kwargs`` builder: bob's queued service
in acme (a queued service can be read, upgraded and deleted without the Kubernetes API).
"""

from __future__ import annotations

import uuid
from typing import Any

from clusters.models import Service, ServiceToken
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


def _token(w: Any) -> dict[str, str]:
    """An invoke token of bob's service, to revoke."""
    kwargs = _bobs(w)
    service = Service.objects.get(request__name=kwargs["name"])
    token = ServiceToken.objects.create(
        service=service, name="spare", prefix="gws_spare", digest=uuid.uuid4().hex
    )
    return {**kwargs, "token_id": str(token.pk)}


MANAGERS_ONLY = members(viewer=403, engineer=200, admin=200, platform=200)
ADMINS_ONLY = members(viewer=403, engineer=403, admin=200, platform=200)

ROUTES.update(
    {
        # A service's endpoint access: its owner and the admins manage invoke tokens, an
        # admin alone makes it public (tests/clusters/kinds/rayservice/test_endpoint_relay.py).
        ONE + "tokens/": Route(
            methods={
                "GET": Case(MANAGERS_ONLY, kwargs=_bobs),
                "POST": Case(
                    members(viewer=403, engineer=201, admin=201, platform=201),
                    kwargs=_bobs,
                    body=lambda w: {"name": "frontend"},
                ),
            }
        ),
        ONE + "tokens/{token_id}/": Route(
            methods={
                "DELETE": Case(
                    members(viewer=403, engineer=204, admin=204, platform=204), kwargs=_token
                )
            }
        ),
        ONE + "public/": Route(
            methods={"POST": Case(ADMINS_ONLY, kwargs=_bobs, body=lambda w: {"public": True})}
        ),
        # The endpoint itself: a token of the tenant reaches it (bob's service is queued,
        # so a 503 saying so); a token of another tenant is a 404, none a 401.
        "serve/{slug}/{name}/{path}": Route(
            passthrough=True,
            methods={
                "GET": Case(
                    members(viewer=503, engineer=503, admin=503, platform=503),
                    kwargs=lambda w: {"slug": "acme", "name": _bobs(w)["name"], "path": "x"},
                )
            },
        ),
        TENANT + "services/{name}/tokens/": Route(
            session=True,
            methods={
                "POST": Case(
                    {
                        **members(viewer=403, engineer=201, admin=201, platform=201),
                        "anonymous": 302,
                    },
                    kwargs=_page,
                    body=lambda w: {"name": "frontend"},
                )
            },
        ),
        TENANT + "services/{name}/tokens/{token_id}/revoke/": Route(
            session=True,
            methods={
                "POST": Case(
                    ACT,
                    kwargs=lambda w: {
                        "slug": "acme",
                        **{k: v for k, v in _token(w).items() if k != "tenant_slug"},
                    },
                )
            },
        ),
        TENANT + "services/{name}/public/": Route(
            session=True,
            methods={
                "POST": Case(
                    {
                        **members(viewer=403, engineer=403, admin=302, platform=302),
                        "anonymous": 302,
                    },
                    kwargs=_page,
                    body=lambda w: {"public": "1"},
                )
            },
        ),
    }
)
