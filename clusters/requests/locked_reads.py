"""What a create's checks read under its tenant's lock, in one statement after it.

A create locks its tenant's row so that two requests cannot both slip under a cap; the
checks then ask whether the name is taken, the owner's live dev usage, the tenant's quota
on the flavor, whether a hard cost cap applies and the default priority class. Asked one
by one that is six round trips on the path every create takes; here it is two.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import connection

from clusters.domain.states import State
from clusters.models import ClusterRequest, CostCap
from clusters.requests import rules
from controlplane.rows import ModelRows
from tenants.models import GpuFlavor, PriorityClass, Quota, Tenant

_QUOTAS = ModelRows(Quota, "q")
_CLASSES = ModelRows(PriorityClass, "p")


@dataclass(frozen=True)
class LockedReads:
    """The answers the create's checks need, read while the tenant's row is locked."""

    name: str
    name_taken: bool
    hard_caps: bool
    dev_usage: tuple[int, Decimal]
    quotas: list[Quota]
    default_class: PriorityClass | None


def lock_and_read(*, tenant: Tenant, owner: Any, name: str, flavor: GpuFlavor) -> LockedReads:
    """Lock ``tenant``'s row until the transaction ends, then read what the checks of
    ``owner``'s request named ``name`` on ``flavor`` ask."""
    # Two statements, not one: under READ COMMITTED a statement reads the snapshot it
    # started with, so reads in the locking statement itself would miss what the lock's
    # previous holder committed while this one waited.
    Tenant.objects.lock(tenant.pk)
    usage_sql, usage_params = rules.dev_usage_sql(tenant=tenant, owner=owner)
    sql = (
        f"SELECT EXISTS (SELECT 1 FROM {ClusterRequest._meta.db_table} n "
        "WHERE n.tenant_id = t.id AND n.name = %s AND n.state <> %s), "
        f"EXISTS (SELECT 1 FROM {CostCap._meta.db_table} c WHERE c.tenant_id = t.id "
        "AND (c.username = '' OR c.username = %s) AND c.hard_limit IS NOT NULL), "
        f"u.clusters, u.gpus, {_QUOTAS.columns}, {_CLASSES.columns} "
        f"FROM {Tenant._meta.db_table} t CROSS JOIN ({usage_sql}) u "
        f"LEFT JOIN {Quota._meta.db_table} q ON q.tenant_id = t.id AND q.flavor_id = %s "
        # At most one class is the default (a unique constraint says so).
        f"LEFT JOIN {PriorityClass._meta.db_table} p ON p.is_default "
        "WHERE t.id = %s"
    )
    params = [name, State.DELETED, owner.get_username(), *usage_params, flavor.pk, tenant.pk]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        raise Tenant.DoesNotExist(f"tenant {tenant.pk} is gone")
    quota_id, class_id = row[4], row[4 + _QUOTAS.width]
    return LockedReads(
        name=name,
        name_taken=bool(row[0]),
        hard_caps=bool(row[1]),
        dev_usage=rules.dev_usage_of(row[2], row[3]),
        quotas=[_QUOTAS.build(row, 4)] if quota_id is not None else [],
        default_class=_CLASSES.build(row, 4 + _QUOTAS.width) if class_id is not None else None,
    )
