"""Periodic work (Celery beat)."""

from __future__ import annotations

from celery.schedules import crontab

from controlplane.settings.k8s import FLEET_HEALTH_INTERVAL_SECONDS
from controlplane.settings.notices import (
    NOTIFY_DISPATCH_INTERVAL_SECONDS,
    NOTIFY_SWEEP_INTERVAL_SECONDS,
)
from controlplane.settings.workers import (
    ACTIVITY_CHECK_SECONDS,
    COST_CAP_CHECK_SECONDS,
    RECONCILE_INTERVAL_SECONDS,
    SWEEP_INTERVAL_SECONDS,
)

# Periodic work: the reconciler, the outbox sweeper and a safety-net admission pass
# (every write also nudges these, so the beat is only the backstop).
CELERY_BEAT_SCHEDULE = {
    "reconcile": {"task": "clusters.tasks.reconcile", "schedule": RECONCILE_INTERVAL_SECONDS},
    "sweep": {"task": "clusters.tasks.sweep", "schedule": SWEEP_INTERVAL_SECONDS},
    "admission": {"task": "clusters.tasks.admission_pass", "schedule": 15.0},
    "activity": {"task": "clusters.tasks.check_activity", "schedule": ACTIVITY_CHECK_SECONDS},
    "notify-dispatch": {
        "task": "notifications.tasks.dispatch",
        "schedule": NOTIFY_DISPATCH_INTERVAL_SECONDS,
    },
    "notify-sweep": {
        "task": "notifications.tasks.sweep",
        "schedule": NOTIFY_SWEEP_INTERVAL_SECONDS,
    },
    "kube-cluster-health": {
        "task": "clusters.tasks.probe_kube_clusters",
        "schedule": FLEET_HEALTH_INTERVAL_SECONDS,
    },
    # Money caps' soft notices (docs/cost.md); hard caps are checked on each request.
    "cost-caps": {
        "task": "notifications.tasks.check_cost_caps",
        "schedule": COST_CAP_CHECK_SECONDS,
    },
    # Last month's cost report to each tenant's admins, early on the 1st (UTC); the task
    # mails each month once, so a missed run is made good by the next one.
    "cost-reports": {
        "task": "notifications.tasks.mail_cost_reports",
        "schedule": crontab(minute=15, hour="*/6", day_of_month="1-3"),
    },
    "purge-expired-tokens": {"task": "tenants.tasks.purge_expired_tokens", "schedule": 3600.0},
}
