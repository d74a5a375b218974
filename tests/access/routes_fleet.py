"""Access table of the fleet's Kubernetes clusters: the API under
``api/v1/platform/kube-clusters/`` and the dashboard's ``platform/kube-clusters/``, for
platform admins only (the API refuses others with 403, the dashboard with 404)."""

from __future__ import annotations

from typing import Any

from clusters.models import KubeCluster
from tests.access.matrix import Case, Route, platform_only

API = "api/v1/platform/kube-clusters/"


def _spare_member(w: Any) -> dict[str, str]:
    """A member nothing is placed on (its server answers nothing: no check runs)."""
    KubeCluster.objects.get_or_create(
        name="spare-member", defaults={"server": "http://127.0.0.1:9", "token_encrypted": ""}
    )
    return {"name": "spare-member"}


ROUTES: dict[str, Route] = {
    API: Route(
        methods={
            "GET": Case(platform_only(200)),
            # Nothing listens there: the credential check refuses it (400, saved nothing).
            "POST": Case(
                platform_only(400),
                body=lambda w: {"name": "nowhere", "server": "http://127.0.0.1:9", "token": "t"},
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
    API + "{name}/check/": Route(methods={"POST": Case(platform_only(200), kwargs=_spare_member)}),
}
