"""Access table of the notifications API and pages (see ``tests/access/matrix.py``).

Every user reads and sets their own preferences and log; a tenant's webhooks are its
admins' (and platform admins'): its engineers and viewers get a 403, others a 404.
"""

from __future__ import annotations

from typing import Any

from notifications.models import TenantWebhook
from tests.access.matrix import Case, Route, everyone, members, statuses

ADMINS = members(viewer=403, engineer=403, admin=200, platform=200)


def _hook(w: Any) -> dict[str, str]:
    """A webhook of acme to delete or test."""
    hook, _ = TenantWebhook.objects.get_or_create(
        tenant=w.acme,
        url="https://hooks.example.com/acme",
        defaults={"kinds": ["cluster_ready"], "secret": "whsec_test"},
    )
    return {"tenant_slug": "acme", "webhook_id": str(hook.pk)}


def _page_hook(w: Any) -> dict[str, str]:
    kwargs = _hook(w)
    return {"slug": kwargs["tenant_slug"], "webhook_id": kwargs["webhook_id"]}


PREFS = {"preferences": [{"kind": "cluster_ready", "email": False, "webhook": True}]}
HOOK = {"url": "https://hooks.example.com/new", "kinds": ["cluster_ready", "failed"]}

ROUTES = {
    "api/v1/notifications/preferences/": Route(
        methods={"GET": Case(everyone(200)), "PUT": Case(everyone(200), body=lambda w: PREFS)}
    ),
    "api/v1/notifications/deliveries/": Route(methods={"GET": Case(everyone(200))}),
    "api/v1/tenants/{tenant_slug}/webhooks/": Route(
        kwargs={"tenant_slug": "acme"},
        methods={
            "GET": Case(ADMINS),
            "POST": Case(
                members(viewer=403, engineer=403, admin=201, platform=201), body=lambda w: HOOK
            ),
        },
    ),
    "api/v1/tenants/{tenant_slug}/webhooks/deliveries/": Route(
        kwargs={"tenant_slug": "acme"}, methods={"GET": Case(ADMINS)}
    ),
    "api/v1/tenants/{tenant_slug}/webhooks/{webhook_id}/": Route(
        methods={
            "DELETE": Case(members(viewer=403, engineer=403, admin=204, platform=204), kwargs=_hook)
        }
    ),
    "api/v1/tenants/{tenant_slug}/webhooks/{webhook_id}/test/": Route(
        methods={
            "POST": Case(members(viewer=403, engineer=403, admin=202, platform=202), kwargs=_hook)
        }
    ),
}

PAGE_READ = statuses(anonymous=302, outsider=200, viewer=200, engineer=200, admin=200, platform=200)
PAGE_ADMINS = statuses(
    anonymous=302, outsider=404, viewer=403, engineer=403, admin=200, platform=200
)
PAGE_ADMIN_POST = {**PAGE_ADMINS, "admin": 302, "platform": 302}
NO_SINK = statuses(anonymous=302, outsider=404, viewer=404, engineer=404, admin=404, platform=404)

ROUTES.update(
    {
        "notifications/": Route(
            session=True,
            methods={
                "GET": Case(PAGE_READ),
                "POST": Case(
                    {
                        **PAGE_READ,
                        "outsider": 302,
                        "viewer": 302,
                        "engineer": 302,
                        "admin": 302,
                        "platform": 302,
                    },
                    body=lambda w: {"webhook_url": "", "cluster_ready-email": "on"},
                ),
            },
        ),
        "t/{slug}/webhooks/": Route(
            session=True,
            kwargs={"slug": "acme"},
            methods={
                "GET": Case(PAGE_ADMINS),
                # The secret is shown on the page that answers the form (once): a 201.
                "POST": Case(
                    {**PAGE_ADMINS, "admin": 201, "platform": 201},
                    body=lambda w: {"url": "https://hooks.example.com/p", "kinds": "failed"},
                ),
            },
        ),
        "t/{slug}/webhooks/{webhook_id}/delete/": Route(
            session=True, methods={"POST": Case(PAGE_ADMIN_POST, kwargs=_page_hook)}
        ),
        "t/{slug}/webhooks/{webhook_id}/test/": Route(
            session=True, methods={"POST": Case(PAGE_ADMIN_POST, kwargs=_page_hook)}
        ),
        # The Mail page exists only with a mail sink (MAIL_SINK_DIR, make run); the suite
        # runs without one. Who reads which mail: tests/notifications/test_mailsink.py.
        "mail/": Route(session=True, methods={"GET": Case(NO_SINK)}),
        "mail/{name}/": Route(
            session=True,
            kwargs={"name": "20260101T000000.000000Z-0123456789ab.eml"},
            methods={"GET": Case(NO_SINK)},
        ),
    }
)
