"""The signed tokens that carry a user from the product to the Ray dashboard's own origin.

The product's session cookie never reaches that origin. The product's Ray route issues a
**grant** instead: a token signed with ``SECRET_KEY`` (salted for this purpose) naming
the tenant, cluster, user, role and dashboard path, valid once for
``RAY_PROXY_GRANT_SECONDS``. The Ray origin redeems it for a **dashboard session**, a
cookie of its own scoped to the cluster's path; every request on it checks again that
the user still sees the cluster with the same role (``ray_origin.py``), so neither
outlives a lost membership or a change of role.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import signing
from django.core.cache import cache

from clusters.models import ClusterRequest

GRANT_SALT = "gangway.rayproxy.grant"
SESSION_SALT = "gangway.rayproxy.session"
SESSION_COOKIE = "gangway_ray"


@dataclass(frozen=True)
class DashboardPass:
    """Who may open which cluster's dashboard: a grant's or a session's contents.

    ``sid`` names the grant (and the session made from it) for the audit and the
    single-use check; ``next`` is the dashboard path and query a grant opens."""

    slug: str
    name: str
    cluster_id: int
    user_id: int
    role: str | None
    sid: str
    next: str = ""

    def _payload(self, *, with_next: bool) -> dict[str, object]:
        payload: dict[str, object] = {
            "t": self.slug,
            "c": self.name,
            "k": self.cluster_id,
            "u": self.user_id,
            "r": self.role,
            "s": self.sid,
        }
        if with_next:
            payload["n"] = self.next
        return payload


def _from_payload(payload: object) -> DashboardPass | None:
    if not isinstance(payload, dict):
        return None
    try:
        return DashboardPass(
            slug=str(payload["t"]),
            name=str(payload["c"]),
            cluster_id=int(payload["k"]),
            user_id=int(payload["u"]),
            role=None if payload["r"] is None else str(payload["r"]),
            sid=str(payload["s"]),
            next=str(payload.get("n", "")),
        )
    except (KeyError, TypeError, ValueError):
        return None


def issue_grant(*, cluster: ClusterRequest, user: Any, role: str | None, next_path: str) -> str:
    """A grant for ``user`` (with ``role`` in the cluster's tenant) to open ``next_path``
    (dashboard path and query) of ``cluster``."""
    grant = DashboardPass(
        slug=cluster.tenant.slug,
        name=cluster.name,
        cluster_id=cluster.pk,
        user_id=user.pk,
        role=role,
        sid=secrets.token_urlsafe(12),
        next=next_path,
    )
    return signing.dumps(grant._payload(with_next=True), salt=GRANT_SALT, compress=True)


def redeem_grant(token: str) -> DashboardPass | None:
    """The grant ``token`` stands for, the first time it is redeemed within its lifetime;
    ``None`` when it is forged, expired or used before."""
    try:
        payload = signing.loads(token, salt=GRANT_SALT, max_age=settings.RAY_PROXY_GRANT_SECONDS)
    except signing.BadSignature:  # SignatureExpired is one
        return None
    grant = _from_payload(payload)
    if grant is None:
        return None
    # Once only: a grant that leaked (a log, a shared link) opens nothing afterwards.
    if not cache.add(f"rayproxy:grant:{grant.sid}", 1, timeout=settings.RAY_PROXY_GRANT_SECONDS):
        return None
    return grant


def session_cookie_value(grant: DashboardPass) -> str:
    """The dashboard session's cookie value for a redeemed grant."""
    return signing.dumps(grant._payload(with_next=False), salt=SESSION_SALT)


def read_session(value: str | None) -> DashboardPass | None:
    """The session a cookie value stands for; ``None`` when absent, forged or expired."""
    if not value:
        return None
    try:
        payload = signing.loads(
            value, salt=SESSION_SALT, max_age=settings.RAY_PROXY_SESSION_MINUTES * 60
        )
    except signing.BadSignature:
        return None
    return _from_payload(payload)


__all__ = [
    "SESSION_COOKIE",
    "DashboardPass",
    "issue_grant",
    "read_session",
    "redeem_grant",
    "session_cookie_value",
]
