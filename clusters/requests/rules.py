"""Who may do what with clusters, and the per-engineer caps, each written once.

The API, the dashboard, the dry-run and the admission pass all ask these; the words of
a refusal differ by audience (a requester hears "you", a queue hears "its owner"), the
rule never does.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import connection

from clusters.admission.caps import CapBreach, user_cap_breach
from clusters.admission.counts_in_words import count as count_of
from clusters.domain.states import LIVE
from clusters.domain.workload_kinds import derived, details_tables
from clusters.models import ClusterKind, ClusterRequest
from controlplane.exceptions import ServiceConflict
from tenants.models import Role, Tenant
from tenants.selectors import role_in_tenant


def may_request(*, role: str | None, kind: str) -> bool:
    """Engineers request dev clusters; production clusters need a tenant admin."""
    needed = Role.ADMIN if kind == ClusterKind.PROD else Role.ENGINEER
    return role is not None and Role.rank(role) >= Role.rank(needed)


def requester_refusal(*, tenant: Tenant, role: str | None, kind: str = ClusterKind.DEV) -> str:
    """Why ``role`` may not request a ``kind`` cluster in ``tenant``, in plain words."""
    needed = "admin" if kind == ClusterKind.PROD else "engineer"
    what = "a production cluster" if kind == ClusterKind.PROD else "a cluster"
    held = f"you are {'an' if role in (Role.ADMIN, Role.ENGINEER) else 'a'} {role}"
    if role is None:
        held = "you are not a member"
    return f"Requesting {what} needs the {needed} role in {tenant.name}; {held}."


def can_manage(*, actor: Any, cluster: ClusterRequest, role: str | None = None) -> bool:
    """Engineers manage their own clusters, tenant admins every one (the services
    enforce it; pages ask it for buttons). ``role``: the actor's, if known."""
    role = role or role_in_tenant(user=actor, tenant=cluster.tenant)
    if role == Role.ADMIN:
        return True
    return role == Role.ENGINEER and cluster.owner_id == getattr(actor, "pk", None)


def owner_dev_usage(
    *, tenant: Tenant, owner: Any, excluding: int | None = None
) -> tuple[int, Decimal]:
    """The owner's live dev clusters in the tenant (queued, running and suspended ones
    alike) and the GPUs they ask for; ``excluding`` leaves one request out. A row that
    runs on another request (a kind's :attr:`Details.host`) is neither.

    Plain SQL: it runs under the tenant's lock in every create, where compiling the ORM's
    aggregate over a join costs more than the query (``tests/clusters/requests`` holds
    it to the ORM's count).
    """
    sql, params = dev_usage_sql(tenant=tenant, owner=owner, excluding=excluding)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return dev_usage_of(row[0], row[1])


def dev_usage_sql(
    *, tenant: Tenant, owner: Any, excluding: int | None = None
) -> tuple[str, list[Any]]:
    """:func:`owner_dev_usage`'s query (columns ``clusters`` and ``gpus``) and its
    parameters, for a statement that reads it with other things."""
    requests = ClusterRequest._meta.db_table
    live = sorted(LIVE)
    states = ", ".join(["%s"] * len(live))  # IN, not = ANY: SQLite serves `make run`
    sql = (
        f"SELECT COUNT(*) AS clusters, COALESCE(SUM(r.gpus), 0) AS gpus FROM {requests} r "
        "WHERE r.tenant_id = %s AND r.owner_id = %s AND r.kind = %s "
        f"AND r.state IN ({states}) AND r.id <> %s" + derived("rules.not_hosted", _not_hosted)
    )
    owner_pk = getattr(owner, "pk", owner)
    return sql, [tenant.pk, owner_pk, ClusterKind.DEV, *live, excluding or 0]


def dev_usage_of(clusters: Any, gpus: Any) -> tuple[int, Decimal]:
    """:func:`owner_dev_usage`'s answer from its query's two columns."""
    # SQLite sums a decimal column as a float: back to the column's own places.
    places = Decimal(1).scaleb(-ClusterRequest._meta.get_field("gpus").decimal_places)
    return int(clusters), Decimal(str(gpus)).quantize(places)


def _not_hosted() -> str:
    """SQL that keeps the rows ``r`` that run on no other request."""
    return "".join(
        f" AND NOT EXISTS (SELECT 1 FROM {d.table} h "
        f"WHERE h.{d.key} = r.id AND h.{d.host} IS NOT NULL)"
        for d in details_tables()
        if d.host
    )


def check_user_caps(
    *,
    tenant: Tenant,
    owner: Any,
    kind: str,
    gpus: Decimal,
    excluding: int | None = None,
    usage: tuple[int, Decimal] | None = None,
) -> None:
    """Refuse a dev request that would put its owner over the tenant's per-engineer caps
    (``ServiceConflict`` ``user_cap``), counted as admission counts them
    (:mod:`clusters.admission.caps`): every live dev request of the owner comes first.
    ``usage``: :func:`owner_dev_usage`'s answer when the caller read it already."""
    if kind != ClusterKind.DEV:
        return
    clusters, held = usage or owner_dev_usage(tenant=tenant, owner=owner, excluding=excluding)
    breach = user_cap_breach(
        max_clusters=tenant.max_dev_clusters_per_user,
        max_gpus=tenant.max_dev_gpus_per_user,
        clusters=clusters,
        gpus=held,
        more_gpus=gpus,
    )
    if breach is not None:
        raise ServiceConflict(_cap_refusal(tenant, breach, gpus), code="user_cap")


def _cap_refusal(tenant: Tenant, breach: CapBreach, gpus: Decimal) -> str:
    if breach.limit == "clusters":
        return (
            f"You already have {count_of(breach.clusters, 'dev cluster')} in {tenant.slug}; "
            f"the limit is {breach.cap}. Delete one first."
        )
    return (
        f"This request would give you {count_of(breach.gpus + gpus, 'dev GPU')} in "
        f"{tenant.slug}; the limit is {breach.cap}."
    )
