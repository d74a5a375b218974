"""Dashboard views: thin translations from HTTP to the selectors and services that the
REST API calls too (STYLE 4). Pages live in :mod:`.pages`, every kind's list, form,
detail, log and actions in :mod:`.workloads` (filled from :mod:`frontend.kinds`), usage in
:mod:`.usage`, the audit log in :mod:`.audit`."""

from frontend.views.access import notebook_open, ray_dashboard
from frontend.views.audit import audit_page, tenant_audit_page
from frontend.views.capacity import capacity_page
from frontend.views.costs import cost_report_page, prices
from frontend.views.fairshare import fairshare_page
from frontend.views.notifications import (
    notifications_page,
    webhook_delete,
    webhook_test,
    webhooks_page,
)
from frontend.views.pages import global_queue, home, queue
from frontend.views.usage import platform_usage_page, usage_page

__all__ = [
    "audit_page",
    "capacity_page",
    "cost_report_page",
    "fairshare_page",
    "global_queue",
    "home",
    "notebook_open",
    "notifications_page",
    "platform_usage_page",
    "prices",
    "queue",
    "ray_dashboard",
    "tenant_audit_page",
    "usage_page",
    "webhook_delete",
    "webhook_test",
    "webhooks_page",
]
