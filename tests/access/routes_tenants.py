"""Access table of the tenants API (users, tokens, flavors, tenants, members, quotas,
audit). See ``tests/access/matrix.py`` for the vocabulary."""

from __future__ import annotations

from typing import Any

from knox.models import AuthToken

from tests.access.matrix import Case, Route, everyone, members, platform_only, statuses

SPARE_TOKEN_ID = "5a5a5a5a5a5a5a5a"
# An ed25519 public key of 32 arbitrary bytes: nobody holds its private half.
SAMPLE_SSH_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG8eeY1k0q2gqgWQ9U0o2H4QzkP1Vv0y6x7oKJ3s1T0c matrix"
)


def _engineers_key(world: Any) -> dict[str, str]:
    """The engineer's SSH key (added when missing), for DELETE."""
    from tenants.ssh_keys import SshKey, parse_public_key

    parsed = parse_public_key(SAMPLE_SSH_KEY)
    key, _ = SshKey.objects.get_or_create(
        user=world.actors["engineer"],
        fingerprint=parsed.fingerprint,
        defaults={"public_key": parsed.line},
    )
    return {"key_id": str(key.pk)}


def _spare_tokens(world: Any) -> dict[str, str]:
    """Give every actor a token whose id is SPARE_TOKEN_ID (ids are digest prefixes, so
    they are unique per user, not across users): each actor revokes their own. Tests that
    send one route several times call this again; a token already there is kept."""
    for index, user in enumerate(u for u in world.actors.values() if u is not None):
        AuthToken.objects.get_or_create(
            digest=SPARE_TOKEN_ID + f"{index:0128x}"[16:],
            defaults={"token_key": f"spare{index:03d}", "user": user},
        )
    return {"token_id": SPARE_TOKEN_ID}


def cohort_row(world: Any) -> dict[str, str]:
    """A cohort with a row of its own, for DELETE to remove."""
    from tenants.models import Cohort

    Cohort.objects.get_or_create(name="spare-cohort", defaults={"parent": "platform"})
    return {"name": "spare-cohort"}


def _priority_class(name: str, value: int) -> Any:
    """A priority class (get or made: the database may have been flushed), as URL kwargs."""

    def build(world: Any) -> dict[str, str]:
        from tenants.models import PriorityClass

        PriorityClass.objects.get_or_create(name=name, defaults={"value": value})
        return {"name": name}

    return build


ROUTES = {
    "api/v1/auth/token/": Route(
        methods={
            # Logging in needs no prior authentication: everybody with valid credentials.
            "POST": Case(
                statuses(
                    anonymous=200, outsider=200, viewer=200, engineer=200, admin=200, platform=200
                ),
                body=lambda w: {"username": "bob", "password": w.password},
            ),
            "DELETE": Case(everyone(204)),
        }
    ),
    "api/v1/auth/tokens/": Route(
        methods={
            # Every user lists and revokes their own tokens, and only theirs.
            "GET": Case(everyone(200)),
            "DELETE": Case(everyone(200)),
        }
    ),
    "api/v1/auth/tokens/{token_id}/": Route(
        methods={"DELETE": Case(everyone(204), kwargs=_spare_tokens)},
    ),
    "api/v1/users/": Route(
        methods={
            "GET": Case(platform_only(200)),
            "POST": Case(
                platform_only(201),
                body=lambda w: {
                    "username": "newcomer",
                    "email": "newcomer@example.com",
                    "password": "a-long-unusual-passphrase-42",
                },
            ),
        }
    ),
    "api/v1/users/me/": Route(methods={"GET": Case(everyone(200))}),
    "api/v1/users/me/ssh-keys/": Route(
        methods={
            "GET": Case(everyone(200)),
            "POST": Case(everyone(201), body=lambda w: {"public_key": SAMPLE_SSH_KEY}),
        }
    ),
    # Each user's own keys only: another's is a 404.
    "api/v1/users/me/ssh-keys/{key_id}/": Route(
        methods={
            "GET": Case(
                statuses(outsider=404, viewer=404, engineer=200, admin=404, platform=404),
                kwargs=_engineers_key,
            ),
            "DELETE": Case(
                statuses(outsider=404, viewer=404, engineer=204, admin=404, platform=404),
                kwargs=_engineers_key,
            ),
        }
    ),
    "api/v1/users/me/password/": Route(
        methods={
            "POST": Case(
                everyone(204),
                body=lambda w: {
                    "old_password": w.password,
                    "new_password": "a-long-unusual-passphrase-77",
                },
            )
        }
    ),
    "api/v1/users/{username}/password/": Route(
        kwargs={"username": "vera"},
        methods={
            "POST": Case(
                platform_only(204),
                body=lambda w: {"temporary_password": "a-long-unusual-passphrase-42"},
            )
        },
    ),
    "api/v1/flavors/": Route(
        methods={
            "GET": Case(everyone(200)),
            "POST": Case(
                platform_only(201),
                body=lambda w: {
                    "name": "a10",
                    "gpu_product": "NVIDIA-A10",
                    "gpus_per_node": 4,
                    "cpu_per_node": 64,
                    "memory_per_node_gib": 256,
                    "node_count": 2,
                    "sharing": True,
                },
            ),
        }
    ),
    "api/v1/flavors/{name}/": Route(
        kwargs={"name": "h100"},
        methods={
            "GET": Case(everyone(200)),
            "PATCH": Case(platform_only(200), body=lambda w: {"node_count": 6}),
            # A flavor nobody references (h100 and l4 are in quotas: that is a 409).
            "DELETE": Case(platform_only(204), kwargs={"name": "spare"}),
        },
    ),
    # The cohort tree names every team's cohort: platform admins only, reads included.
    "api/v1/cohorts/": Route(methods={"GET": Case(platform_only(200))}),
    "api/v1/cohorts/{name}/": Route(
        kwargs={"name": "research"},
        methods={
            "GET": Case(platform_only(200), kwargs={"name": "default"}),
            "PUT": Case(platform_only(201), body=lambda w: {"parent": "platform"}),
            "DELETE": Case(platform_only(204), kwargs=cohort_row),
        },
    ),
    # A class names the tenants it allows: platform admins only, reads included.
    "api/v1/platform/priority-classes/": Route(
        methods={
            "GET": Case(platform_only(200)),
            "POST": Case(platform_only(201), body=lambda w: {"name": "matrix-made", "value": 4242}),
        }
    ),
    "api/v1/platform/priority-classes/{name}/": Route(
        kwargs={"name": "matrix-class"},
        methods={
            "GET": Case(platform_only(200), kwargs=_priority_class("matrix-class", 4243)),
            "PUT": Case(
                platform_only(200),
                kwargs=_priority_class("matrix-class", 4243),
                body=lambda w: {"value": 4244, "description": "put"},
            ),
            "PATCH": Case(
                platform_only(200),
                kwargs=_priority_class("matrix-class", 4243),
                body=lambda w: {"description": "patched"},
            ),
            "DELETE": Case(platform_only(204), kwargs=_priority_class("matrix-spare", 4245)),
        },
    ),
    "api/v1/tenants/": Route(
        methods={
            "GET": Case(everyone(200)),
            "POST": Case(platform_only(201), body=lambda w: {"slug": "initech", "name": "Initech"}),
        }
    ),
    "api/v1/tenants/{slug}/": Route(
        kwargs={"slug": "acme"},
        methods={
            "GET": Case(members(viewer=200, engineer=200, admin=200, platform=200)),
            "PATCH": Case(
                members(viewer=403, engineer=403, admin=403, platform=200),
                body=lambda w: {"name": "Acme Labs", "policy": {"dev_ttl_hours": 12}},
            ),
        },
    ),
    "api/v1/tenants/{tenant_slug}/members/": Route(
        kwargs={"tenant_slug": "acme"},
        methods={
            "GET": Case(members(viewer=200, engineer=200, admin=200, platform=200)),
            "POST": Case(
                members(viewer=403, engineer=403, admin=201, platform=201),
                body=lambda w: {"username": "dave", "role": "engineer"},
            ),
        },
    ),
    "api/v1/tenants/{tenant_slug}/members/{username}/": Route(
        kwargs={"tenant_slug": "acme", "username": "bob"},
        methods={
            "PATCH": Case(
                members(viewer=403, engineer=403, admin=200, platform=200),
                body=lambda w: {"role": "viewer"},
            ),
            "DELETE": Case(members(viewer=403, engineer=403, admin=204, platform=204)),
        },
    ),
    # A tenant's own admins set how their engineers share it (platform admins too).
    "api/v1/tenants/{tenant_slug}/policy/": Route(
        kwargs={"tenant_slug": "acme"},
        methods={
            "GET": Case(members(viewer=200, engineer=200, admin=200, platform=200)),
            "PATCH": Case(
                members(viewer=403, engineer=403, admin=200, platform=200),
                body=lambda w: {"max_dev_clusters_per_user": 2, "idle_suspend_minutes": 30},
            ),
        },
    ),
    "api/v1/tenants/{tenant_slug}/priority-classes/": Route(
        kwargs={"tenant_slug": "acme"},
        methods={"GET": Case(members(viewer=200, engineer=200, admin=200, platform=200))},
    ),
    "api/v1/tenants/{tenant_slug}/quotas/": Route(
        kwargs={"tenant_slug": "acme"},
        methods={
            "GET": Case(members(viewer=200, engineer=200, admin=200, platform=200)),
            "PUT": Case(
                members(viewer=403, engineer=403, admin=403, platform=200),
                body=lambda w: {
                    "flavors": [{"flavor": "h100", "gpus": 24, "borrow_limit": 0}],
                    "cpu": 500,
                    "memory_gib": 4000,
                },
            ),
        },
    ),
    # Engineers and viewers get an empty list rather than a 403 (documented in README).
    "api/v1/audit/": Route(methods={"GET": Case(everyone(200))}),
}
