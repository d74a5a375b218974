"""Which priority class a new request runs in (docs/preemption.md "Priority classes").

A request names a class or none. None: the platform's default class (or no class at
all when there is none: value 0, no preemption, no protection). A named class must be
one the tenant may pick; a class that may preempt is picked by the tenant's admins only,
as the ``priority`` field is: preempting takes running work of other requests (maybe
other tenants') off its GPUs, which is a tenant-level decision, not one engineer's.
The default class is never refused: the platform chose it for everyone.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError

from tenants.models import PriorityClass, Role, Tenant
from tenants.selectors import default_priority_class, may_use, priority_classes_for


class Unread:
    """The type of :data:`UNREAD`: a value the caller did not read (``None`` is one)."""


UNREAD = Unread()


def request_priority_class(
    *,
    tenant: Tenant,
    role: str | None,
    chosen: PriorityClass | None,
    default: PriorityClass | Unread | None = UNREAD,
) -> PriorityClass | None:
    """The class a request of ``tenant`` by someone of ``role`` runs in, given the class
    it named (``chosen``, ``None``: none named); a class it may not pick is a
    ``ValidationError`` on ``priority_class`` naming the ones it may. ``default``: the
    default class (``None``: there is none) when the caller read it already."""
    if chosen is None:
        return default_priority_class() if isinstance(default, Unread) else default
    if chosen.is_default:
        return chosen
    if not may_use(chosen, tenant):
        names = ", ".join(pc.name for pc in priority_classes_for(tenant)) or "none"
        raise ValidationError(
            {
                "priority_class": [
                    f"{tenant.slug} may not use priority class {chosen.name}; it may use: {names}."
                ]
            }
        )
    if chosen.may_preempt and role != Role.ADMIN:
        raise ValidationError(
            {
                "priority_class": [
                    f"Priority class {chosen.name} may preempt other requests: only the "
                    "tenant's admins pick it."
                ]
            }
        )
    return chosen
