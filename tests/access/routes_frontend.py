"""Access table of the dashboard pages (session sign-in; see ``tests/access/matrix.py``).

Anonymous visitors are sent to the login page; another tenant's member gets a 404;
viewers read but cannot request or change clusters or jobs.
"""

from __future__ import annotations

from typing import Any

from clusters.models import ClusterRequest, Job
from tenants.models import GpuFlavor
from tests.access.matrix import Case, Route, members, statuses
from tests.access.routes_clusters import _bobs
from tests.access.routes_tenants import _engineers_key, _priority_class, cohort_row

TENANT = "t/{slug}/"
READ = statuses(anonymous=302, outsider=404, viewer=200, engineer=200, admin=200, platform=200)
SHAPE = {"kind": "dev", "flavor": "l4", "workers": 1}


def _bobs_job(w: Any) -> dict[str, str]:
    """bob's queued job in acme (a row as the service writes it, with its Job)."""
    request, _ = ClusterRequest.objects.get_or_create(
        tenant=w.acme,
        name="bob-job",
        defaults={
            "owner": w.actors["engineer"],
            "workload": "job",
            "flavor": GpuFlavor.objects.get(name="l4"),
            "workers": 1,
            "gpus": 1,
        },
    )
    Job.objects.get_or_create(request=request, defaults={"entrypoint": "python x.py"})
    return {"slug": "acme", "name": request.name}


def _paused(w: object) -> dict[str, str]:
    _bobs("suspended", "bob-paused")(w)
    return {}


def _acme_cluster(w: object) -> dict[str, str]:
    kwargs = _bobs("ready")(w)
    return {"slug": kwargs["tenant_slug"], "name": kwargs["name"]}


ROUTES = {
    TENANT: Route(session=True, kwargs={"slug": "acme"}, methods={"GET": Case(READ)}),
    TENANT + "clusters/new/": Route(
        session=True,
        kwargs={"slug": "acme"},
        methods={
            "GET": Case({**READ, "viewer": 403}),
            # A valid form redirects to the new cluster's page.
            "POST": Case(
                {**members(viewer=403, engineer=302, admin=302, platform=302), "anonymous": 302},
                body=lambda w: SHAPE,
            ),
        },
    ),
    TENANT + "clusters/new/verdict/": Route(
        session=True,
        kwargs={"slug": "acme"},
        methods={"POST": Case({**READ, "viewer": 403}, body=lambda w: SHAPE)},
    ),
    TENANT + "queue/": Route(session=True, kwargs={"slug": "acme"}, methods={"GET": Case(READ)}),
    TENANT + "usage/": Route(session=True, kwargs={"slug": "acme"}, methods={"GET": Case(READ)}),
    TENANT + "clusters/{name}/": Route(
        session=True, methods={"GET": Case(READ, kwargs=_acme_cluster)}
    ),
    TENANT + "clusters/{name}/manifests.yaml": Route(
        session=True, methods={"GET": Case(READ, kwargs=_acme_cluster)}
    ),
    TENANT + "clusters/{name}/log/": Route(
        session=True, methods={"GET": Case(READ, kwargs=_acme_cluster)}
    ),
    TENANT + "clusters/{name}/ray/{path}": Route(
        session=True,
        methods={
            "GET": Case(
                {**READ, "viewer": 409, "engineer": 409, "admin": 409, "platform": 409},
                kwargs=lambda w: (
                    {"slug": "acme", "name": "bob-paused", "path": "api/version"} | _paused(w)
                ),
            )
        },
    ),
    # bob's notebook: its owner and the tenant's admin may open it (409 here: the matrix
    # runs without the clusters' origin, which alone serves notebooks), and so may a
    # platform admin, an admin of every tenant; nobody else may.
    TENANT + "clusters/{name}/notebook/": Route(
        session=True,
        methods={
            "GET": Case(
                members(viewer=403, engineer=409, admin=409, platform=409) | {"anonymous": 302},
                kwargs=lambda w: {
                    "slug": "acme",
                    "name": _bobs("ready", "bob-nb", notebook=True)(w)["name"],
                },
            )
        },
    ),
    TENANT + "clusters/{name}/{action}/": Route(
        session=True,
        methods={
            "POST": Case(
                {**members(viewer=403, engineer=302, admin=302, platform=302), "anonymous": 302},
                kwargs=lambda w: {**_acme_cluster(w), "action": "extend"},
                body=lambda w: {"hours": 4},
            )
        },
    ),
}

ACT = {**members(viewer=403, engineer=302, admin=302, platform=302), "anonymous": 302}
ROUTES.update(
    {
        TENANT + "jobs/": Route(session=True, kwargs={"slug": "acme"}, methods={"GET": Case(READ)}),
        TENANT + "jobs/new/": Route(
            session=True,
            kwargs={"slug": "acme"},
            methods={
                "GET": Case({**READ, "viewer": 403}),
                # A valid form redirects to the new job's page.
                "POST": Case(ACT, body=lambda w: {**SHAPE, "entrypoint": "python x.py"}),
            },
        ),
        TENANT + "jobs/new/verdict/": Route(
            session=True,
            kwargs={"slug": "acme"},
            methods={
                "POST": Case(
                    {**READ, "viewer": 403}, body=lambda w: {**SHAPE, "entrypoint": "python x.py"}
                )
            },
        ),
        TENANT + "jobs/{name}/": Route(session=True, methods={"GET": Case(READ, kwargs=_bobs_job)}),
        TENANT + "jobs/{name}/log/": Route(
            session=True, methods={"GET": Case(READ, kwargs=_bobs_job)}
        ),
        TENANT + "jobs/{name}/{action}/": Route(
            session=True,
            methods={"POST": Case(ACT, kwargs=lambda w: {**_bobs_job(w), "action": "stop"})},
        ),
    }
)

PLATFORM_PAGE = Route(
    session=True,
    methods={
        "GET": Case(
            statuses(anonymous=302, outsider=404, viewer=404, engineer=404, admin=404, platform=200)
        )
    },
)
# The platform's pages: every tenant's queue, capacity and fair share.
ROUTES["queue/"] = PLATFORM_PAGE
ROUTES["capacity/"] = PLATFORM_PAGE
ROUTES["fair-share/"] = PLATFORM_PAGE


PLATFORM_ONLY = statuses(
    anonymous=302, outsider=404, viewer=404, engineer=404, admin=404, platform=200
)
ROUTES["usage/"] = Route(session=True, methods={"GET": Case(PLATFORM_ONLY)})
ROUTES["audit/"] = Route(session=True, methods={"GET": Case(PLATFORM_ONLY)})
# Showback (docs/cost.md): the prices page and its form (platform admins), a tenant's
# cost report (its members) whose caps form its admins and platform admins submit.
ROUTES["platform/prices/"] = Route(
    session=True,
    methods={
        "GET": Case(PLATFORM_ONLY),
        "POST": Case(
            {**PLATFORM_ONLY, "platform": 302},
            body=lambda w: {"flavor": "h100", "price_per_gpu_hour": "2"},
        ),
    },
)
ROUTES[TENANT + "usage/report/"] = Route(
    session=True,
    kwargs={"slug": "acme"},
    methods={
        "GET": Case(READ),
        "POST": Case(
            {**READ, "viewer": 403, "engineer": 403, "admin": 302, "platform": 302},
            body=lambda w: {"soft_limit": "10", "hard_limit": "20"},
        ),
    },
)
# A tenant's audit log: its admins and platform admins; its other members get a 404.
ROUTES[TENANT + "audit/"] = Route(
    session=True,
    kwargs={"slug": "acme"},
    methods={"GET": Case({**READ, "viewer": 404, "engineer": 404})},
)

# Platform administration: platform admins only; a form that worked redirects (302).
PLATFORM_FORM = statuses(
    anonymous=302, outsider=404, viewer=404, engineer=404, admin=404, platform=302
)
QUOTA_FORM = {"cpu": 1000, "memory_gib": 8000, "h100-gpus": 16, "l4-gpus": 2}
ROUTES["platform/users/"] = Route(session=True, methods={"GET": Case(PLATFORM_ONLY)})
ROUTES["platform/users/{user_id}/{action}/"] = Route(
    session=True,
    methods={
        "POST": Case(
            PLATFORM_FORM,
            kwargs=lambda w: {"user_id": str(w.actors["viewer"].pk), "action": "make-admin"},
        )
    },
)
ROUTES["platform/users/{user_id}/password/"] = Route(
    session=True,
    methods={
        "POST": Case(
            PLATFORM_FORM,
            kwargs=lambda w: {"user_id": str(w.actors["viewer"].pk)},
            body=lambda w: {"temporary_password": "a-long-unusual-passphrase-42"},
        )
    },
)
ROUTES["account/password/"] = Route(
    session=True,
    methods={
        "GET": Case(
            statuses(anonymous=302, outsider=200, viewer=200, engineer=200, admin=200, platform=200)
        )
    },
)
# Your own SSH keys: every signed-in user has the page; removing another's key is a 404.
ROUTES["account/ssh-keys/"] = Route(
    session=True,
    methods={
        "GET": Case(
            statuses(anonymous=302, outsider=200, viewer=200, engineer=200, admin=200, platform=200)
        )
    },
)
ROUTES["account/ssh-keys/{key_id}/remove/"] = Route(
    session=True,
    methods={
        "POST": Case(
            statuses(
                anonymous=302, outsider=404, viewer=404, engineer=302, admin=404, platform=404
            ),
            kwargs=_engineers_key,
        )
    },
)
ROUTES["platform/flavors/"] = Route(session=True, methods={"GET": Case(PLATFORM_ONLY)})
# The what-if planner: the form (without ``run``); tests/frontend/test_whatif_page.py runs it.
ROUTES["platform/whatif/"] = Route(session=True, methods={"GET": Case(PLATFORM_ONLY)})
ROUTES["platform/flavors/{name}/"] = Route(
    session=True, kwargs={"name": "l4"}, methods={"GET": Case(PLATFORM_ONLY)}
)
ROUTES["platform/flavors/{name}/delete/"] = Route(
    session=True, kwargs={"name": "spare"}, methods={"POST": Case(PLATFORM_FORM)}
)
ROUTES["platform/cohorts/"] = Route(session=True, methods={"GET": Case(PLATFORM_ONLY)})


ROUTES["platform/cohorts/{name}/delete/"] = Route(
    session=True, methods={"POST": Case(PLATFORM_FORM, kwargs=cohort_row)}
)
ROUTES["platform/priority-classes/"] = Route(session=True, methods={"GET": Case(PLATFORM_ONLY)})
ROUTES["platform/priority-classes/{name}/delete/"] = Route(
    session=True,
    methods={"POST": Case(PLATFORM_FORM, kwargs=_priority_class("matrix-spare", 4245))},
)
ROUTES["platform/tenants/"] = Route(session=True, methods={"GET": Case(PLATFORM_ONLY)})
ROUTES["platform/tenants/{slug}/"] = Route(
    session=True, kwargs={"slug": "acme"}, methods={"GET": Case(PLATFORM_ONLY)}
)
ROUTES["platform/tenants/{slug}/quota/"] = Route(
    session=True,
    kwargs={"slug": "acme"},
    methods={"POST": Case(PLATFORM_FORM, body=lambda w: QUOTA_FORM)},
)
ROUTES["platform/tenants/{slug}/quota/preview/"] = Route(
    session=True,
    kwargs={"slug": "acme"},
    methods={"POST": Case(PLATFORM_ONLY, body=lambda w: QUOTA_FORM)},
)
ROUTES["platform/tenants/{slug}/{action}/"] = Route(
    session=True,
    kwargs={"slug": "globex", "action": "archive"},
    methods={"POST": Case(PLATFORM_FORM)},
)

# A tenant's admins: members, policy, queue controls. Its other members get a 403 that
# says who may; another tenant's a 404.
ADMIN_PAGE = {**READ, "viewer": 403, "engineer": 403}
ADMIN_FORM = {**members(viewer=403, engineer=403, admin=302, platform=302), "anonymous": 302}
ROUTES[TENANT + "members/"] = Route(
    session=True, kwargs={"slug": "acme"}, methods={"GET": Case(ADMIN_PAGE)}
)
ROUTES[TENANT + "members/{username}/role/"] = Route(
    session=True,
    kwargs={"slug": "acme", "username": "vera"},
    methods={"POST": Case(ADMIN_FORM, body=lambda w: {"role": "engineer"})},
)
ROUTES[TENANT + "members/{username}/remove/"] = Route(
    session=True,
    kwargs={"slug": "acme", "username": "vera"},
    methods={"POST": Case(ADMIN_FORM)},
)
ROUTES[TENANT + "policy/"] = Route(
    session=True, kwargs={"slug": "acme"}, methods={"GET": Case(ADMIN_PAGE)}
)


def _bobs_waiting(w: Any) -> dict[str, str]:
    kwargs = _bobs("queued", "bob-waits")(w)
    return {"slug": kwargs["tenant_slug"], "name": kwargs["name"]}


ROUTES[TENANT + "clusters/{name}/manage/"] = Route(
    session=True, methods={"GET": Case(ADMIN_PAGE, kwargs=_bobs_waiting)}
)
ROUTES[TENANT + "clusters/{name}/manage/{control}/"] = Route(
    session=True,
    methods={
        "POST": Case(
            ADMIN_FORM,
            kwargs=lambda w: {**_bobs_waiting(w), "control": "priority"},
            body=lambda w: {"priority": 5, "reason": "the demo on Friday"},
        )
    },
)
