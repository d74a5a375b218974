"""Dashboard views: thin translations from HTTP to the selectors and services that the
REST API calls too (STYLE 4). Pages live in :mod:`.pages`, a cluster's form, detail and
actions in :mod:`.clusters`, a job's in :mod:`.jobs`, usage in :mod:`.usage`, the audit log
in :mod:`.audit`."""

from frontend.views.access import ray_dashboard
from frontend.views.audit import audit_page, tenant_audit_page
from frontend.views.capacity import capacity_page
from frontend.views.clusters import (
    cluster_action,
    cluster_detail,
    cluster_dry_run,
    cluster_log,
    cluster_manifests_download,
    cluster_new,
)
from frontend.views.fairshare import fairshare_page
from frontend.views.jobs import job_action, job_detail, job_dry_run, job_list, job_log, job_new
from frontend.views.notifications import (
    notifications_page,
    webhook_delete,
    webhook_test,
    webhooks_page,
)
from frontend.views.pages import cluster_list, global_queue, home, queue
from frontend.views.usage import platform_usage_page, usage_page

__all__ = [
    "audit_page",
    "capacity_page",
    "cluster_action",
    "cluster_detail",
    "cluster_dry_run",
    "cluster_list",
    "cluster_log",
    "cluster_manifests_download",
    "cluster_new",
    "fairshare_page",
    "global_queue",
    "home",
    "job_action",
    "job_detail",
    "job_dry_run",
    "job_list",
    "job_log",
    "job_new",
    "notifications_page",
    "platform_usage_page",
    "queue",
    "ray_dashboard",
    "tenant_audit_page",
    "usage_page",
    "webhook_delete",
    "webhook_test",
    "webhooks_page",
]
