"""Expected status per actor for the routes of the clusters API (dry-run and manifests).

``ROUTES[pattern][method] = (statuses, body)``: ``pattern`` is the route's full pattern
as ``str()`` of its URL patterns; ``statuses`` maps each actor (anonymous, outsider —
a member of another tenant —, viewer, engineer, admin, platform_admin) to the status
expected for tenant ``acme``; ``body(ctx)`` returns the JSON body to send (``ctx`` may
carry fixtures; unused here). The manifests route expects a cluster named ``bob-dev``
in acme to exist (the matrix test creates it).
"""

from __future__ import annotations

from typing import Any

Body = Any


def _dev_body(ctx: Any = None) -> dict[str, Any]:
    return {"flavor": "h100", "workers": 1}


def _no_body(ctx: Any = None) -> None:
    return None


TENANT = "api/v1/tenants/<slug:tenant_slug>/"
ACTORS = ("anonymous", "outsider", "viewer", "engineer", "admin", "platform_admin")

ROUTES: dict[str, dict[str, tuple[dict[str, int], Body]]] = {
    TENANT + "^clusters/dry-run/$": {
        "POST": (
            {
                "anonymous": 401,
                "outsider": 404,
                "viewer": 403,
                "engineer": 200,
                "admin": 200,
                "platform_admin": 200,
            },
            _dev_body,
        ),
    },
    TENANT + "^clusters/(?P<name>[a-z]([-a-z0-9]*[a-z0-9])?)/manifests/$": {
        "GET": (
            {
                "anonymous": 401,
                "outsider": 404,
                "viewer": 200,
                "engineer": 200,
                "admin": 200,
                "platform_admin": 200,
            },
            _no_body,
        ),
    },
}
