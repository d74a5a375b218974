"""The tenants app's database-derived gauges, recomputed at each ``/metrics`` scrape.

Registered with :func:`controlplane.metrics.on_scrape` in ``TenantsConfig.ready()``.
"""

from __future__ import annotations

from controlplane.metrics import TENANTS
from tenants.models import Tenant


def refresh_tenant_gauges() -> None:
    """Set the number of tenants (every tenant: a scrape sees the whole platform)."""
    TENANTS.set(Tenant.objects.unscoped().count())
