"""Access table of the fleet's Kubernetes clusters: the API under
``api/v1/platform/kube-clusters/`` and the dashboard's ``platform/kube-clusters/``, for
platform admins only (the API refuses others with 403, the dashboard with 404)."""

from __future__ import annotations

import atexit
import functools
from typing import Any

from clusters.models import KubeCluster
from kubesim import KubeSim
from tests.access.matrix import Case, Route, platform_only, statuses
from tests.clusters.members.conftest import start_member_sim

API = "api/v1/platform/kube-clusters/"


def _spare_member(w: Any) -> dict[str, str]:
    """A member nothing is placed on (its server answers nothing: no check runs)."""
    KubeCluster.objects.get_or_create(
        name="spare-member", defaults={"server": "http://127.0.0.1:9", "token_encrypted": ""}
    )
    return {"name": "spare-member"}


def _cap(w: Any, gpus: Any) -> dict[str, Any]:
    """A cap on acme's h100 quota in the spare member."""
    return {
        "tenant": "acme",
        "kube_cluster": _spare_member(w)["name"],
        "flavor": "h100",
        "gpus": gpus,
    }


@functools.cache
def _member_sim() -> KubeSim:
    """One kubesim per test process for the registrations of the table (started when a
    case first needs it): a create is a 201 only when the credential check passes."""
    sim = start_member_sim()
    atexit.register(sim.stop)
    return sim


ROUTES: dict[str, Route] = {
    API: Route(
        methods={
            "GET": Case(platform_only(200)),
            "POST": Case(
                platform_only(201),
                body=lambda w: {
                    "name": "registered",
                    "server": _member_sim().url,
                    "token": "member-token",
                },
            ),
        }
    ),
    API + "{name}/": Route(
        methods={
            "GET": Case(platform_only(200), kwargs=_spare_member),
            "PATCH": Case(
                platform_only(200), kwargs=_spare_member, body=lambda w: {"placement_order": 7}
            ),
            "DELETE": Case(platform_only(204), kwargs=_spare_member),
        }
    ),
    API + "{name}/cordon/": Route(methods={"POST": Case(platform_only(200), kwargs=_spare_member)}),
    API + "{name}/uncordon/": Route(
        methods={"POST": Case(platform_only(200), kwargs=_spare_member)}
    ),
    API + "{name}/drain/": Route(
        methods={
            "POST": Case(
                platform_only(200), kwargs=_spare_member, body=lambda w: {"mode": "requeue"}
            )
        }
    ),
    API + "{name}/check/": Route(methods={"POST": Case(platform_only(200), kwargs=_spare_member)}),
    API + "{name}/stock/": Route(
        methods={
            "PUT": Case(
                platform_only(200),
                kwargs=_spare_member,
                body=lambda w: {"flavor": "h100", "node_count": 2},
            )
        }
    ),
    # Caps on tenants' quotas per member (clusters/api/quota_cap_views.py).
    "api/v1/platform/quota-caps/": Route(
        methods={
            "GET": Case(platform_only(200)),
            "PUT": Case(platform_only(200), body=lambda w: _cap(w, 4)),
        }
    ),
    # Fair share per cohort, recent usage included (clusters/api/fair_share_views.py).
    "api/v1/platform/fair-share/": Route(methods={"GET": Case(platform_only(200))}),
}

# The dashboard's pages: platform admins only, a 404 for anybody else.
PAGE = statuses(anonymous=302, outsider=404, viewer=404, engineer=404, admin=404, platform=200)
FORM = statuses(anonymous=302, outsider=404, viewer=404, engineer=404, admin=404, platform=302)
ROUTES["platform/kube-clusters/"] = Route(session=True, methods={"GET": Case(PAGE)})
ROUTES["platform/kube-clusters/{name}/"] = Route(
    session=True, methods={"GET": Case(PAGE, kwargs=_spare_member)}
)
ROUTES["platform/kube-clusters/{name}/stock/"] = Route(
    session=True,
    methods={
        "POST": Case(
            FORM, kwargs=_spare_member, body=lambda w: {"flavor": "h100", "node_count": "2"}
        )
    },
)
ROUTES["platform/tenants/{slug}/quota/caps/"] = Route(
    session=True,
    kwargs={"slug": "acme"},
    methods={
        "POST": Case(
            FORM,
            body=lambda w: {
                "kube_cluster": _spare_member(w)["name"],
                "flavor": "h100",
                "gpus": "4",
            },
        )
    },
)
ROUTES["platform/kube-clusters/{name}/{action}/"] = Route(
    session=True,
    methods={"POST": Case(FORM, kwargs=lambda w: {**_spare_member(w), "action": "cordon"})},
)
