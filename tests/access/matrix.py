"""The vocabulary of the route-access tables (``tests/access/routes_*.py``).

Each app's table maps a route template — the URL pattern with ``{kwarg}`` for each
converter, e.g. ``api/v1/tenants/{tenant_slug}/members/`` — to a :class:`Route`: the
URL kwargs and, per HTTP method, a :class:`Case` giving the status every actor must
get and how to build a valid body. ``test_route_matrix`` collects ``ROUTES``,
``PUBLIC`` and ``EXEMPT`` from every ``routes_*.py`` module, so adding an app's
routes means adding one file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# The actors, in a fixed order: nobody; charlie (engineer of another tenant, globex);
# vera (viewer), bob (engineer) and alice (admin) of acme; root (platform admin).
ACTORS = ("anonymous", "outsider", "viewer", "engineer", "admin", "platform")

Builder = Callable[[Any], Any]  # World -> body or kwargs


@dataclass(frozen=True)
class Case:
    """One method of one route: the expected status per actor, a valid body, and URL
    kwargs overriding the route's (e.g. a spare object to delete)."""

    expect: dict[str, int]
    body: Builder | None = None
    kwargs: dict[str, str] | Builder | None = None

    def __post_init__(self) -> None:
        missing = set(ACTORS) - set(self.expect)
        if missing:
            raise ValueError(f"Case lacks an expectation for {sorted(missing)}")


@dataclass(frozen=True)
class Route:
    """A route template's URL kwargs and its cases by method (upper case).

    ``session`` routes are dashboard pages: the actor signs in with a session (not a
    token), bodies are form-encoded, and anonymous users are redirected to the login
    page (302) rather than refused. ``passthrough`` routes (the Ray dashboard proxy)
    forward what they get, so the API's body and format checks do not apply to them.
    """

    methods: dict[str, Case]
    kwargs: dict[str, str] = field(default_factory=dict)
    session: bool = False
    # The Ray dashboard proxy forwards bodies, query strings and formats as they come:
    # the API's own rules for them (JSON only, no unknown keys) are not its to apply.
    passthrough: bool = False


def statuses(
    *,
    anonymous: int = 401,
    outsider: int,
    viewer: int,
    engineer: int,
    admin: int,
    platform: int,
) -> dict[str, int]:
    """Spell out every actor's status (no defaults except anonymous' 401)."""
    return {
        "anonymous": anonymous,
        "outsider": outsider,
        "viewer": viewer,
        "engineer": engineer,
        "admin": admin,
        "platform": platform,
    }


def everyone(code: int) -> dict[str, int]:
    """Any authenticated user gets ``code``."""
    return statuses(outsider=code, viewer=code, engineer=code, admin=code, platform=code)


def platform_only(code: int, *, others: int = 403) -> dict[str, int]:
    """Platform admins get ``code``; every other authenticated user ``others``."""
    return statuses(outsider=others, viewer=others, engineer=others, admin=others, platform=code)


def members(*, viewer: int, engineer: int, admin: int, platform: int) -> dict[str, int]:
    """A route of one tenant (acme): another tenant's member always gets a 404."""
    return statuses(outsider=404, viewer=viewer, engineer=engineer, admin=admin, platform=platform)


def url_kwargs(world: Any, route: Route, case: Case) -> dict[str, str]:
    """The route's URL kwargs with the case's overrides (building them, and so creating
    their target, when the case gives a builder)."""
    kwargs = dict(route.kwargs)
    if case.kwargs is not None:
        kwargs.update(case.kwargs(world) if callable(case.kwargs) else case.kwargs)
    return kwargs


def case_url(world: Any, template: str, route: Route, case: Case) -> str:
    """The path a case is sent to: the template filled with :func:`url_kwargs`."""
    return "/" + template.format(**url_kwargs(world, route, case))
