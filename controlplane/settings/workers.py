"""Celery and the engine's pacing: the broker, task limits, how often passes run and
how they coalesce, admission's aging, idle reclaim and budgets."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from controlplane.env import env_bool, env_float, env_int, env_str
from controlplane.settings.core import VAR_DIR

# The database row is the desired state; a message is only a nudge. These settings make
# sure a nudge is not lost when a worker dies mid-task (acks_late + reject on loss), that
# a worker holds one message at a time, and that Redis does not hand a message to a second
# worker while the first is still within its time limit (visibility timeout > time limit).
# The default is the embedded broker of `make run` (controlplane/embedded_broker.py): an
# SQLite file under var/, written and read in transactions. Production sets redis://.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", f"sqlite:///{VAR_DIR / 'broker.sqlite3'}")
if CELERY_BROKER_URL.startswith("filesystem:"):
    raise ImproperlyConfigured(
        "CELERY_BROKER_URL=filesystem:// is not supported: Kombu's filesystem transport can "
        "hand a worker a half-written message. Leave CELERY_BROKER_URL unset for the embedded "
        "SQLite broker, or use redis://."
    )
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 300, minimum=10)
CELERY_TASK_SOFT_TIME_LIMIT = max(CELERY_TASK_TIME_LIMIT - 30, 5)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "gangway")
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery's Django fix-up closes the database connection before and after every task
# unless this is set; it then closes it only every this many tasks. A worker process
# runs hundreds of short tasks a second in a burst, and a new connection for each
# (PostgreSQL starts a backend per connection) would cost more than the task.
# controlplane/celery.py gives each task what Django gives each request instead: a
# connection past CONN_MAX_AGE or one that failed is closed, and a kept one is
# health-checked before its first query.
CELERY_DB_REUSE_MAX = env_int("CELERY_DB_REUSE_MAX", 1000, minimum=1)
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
    "visibility_timeout": CELERY_TASK_TIME_LIMIT * 4,
}
if CELERY_BROKER_URL.startswith("sqlite:"):
    CELERY_BROKER_TRANSPORT = "controlplane.embedded_broker:Transport"
    # An idle worker polls the file (a plain read) this often: the delay a nudge may wait.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"polling_interval": 0.1}
    # Broadcasts (remote control) need a transport with fanout across processes, which
    # this one lacks; nothing in gangway uses them.
    CELERY_WORKER_ENABLE_REMOTE_CONTROL = False
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# A page of a tenant's cluster list is served again from the cache while nothing it shows
# has changed (clusters/api/listcache.py), for at most this long; 0 renders every list.
CLUSTER_LIST_CACHE_SECONDS = env_int("CLUSTER_LIST_CACHE_SECONDS", 60, minimum=0)
# On a queue large enough that reading it for a dry-run takes a while, a verdict
# answers from the last reading, at most this old, while the next is read in the
# background (clusters/queue/dry_run_cache.py); 0 always waits.
DRY_RUN_STALE_SECONDS = env_float("DRY_RUN_STALE_SECONDS", 10.0)
RECONCILE_INTERVAL_SECONDS = env_float("RECONCILE_INTERVAL_SECONDS", 5.0)
SWEEP_INTERVAL_SECONDS = env_float("SWEEP_INTERVAL_SECONDS", 30.0)
# A provisioned cluster asks for a reconcile pass this much later, so that the clusters
# provisioned meanwhile share that pass (passes are coalesced: one pending at a time);
# the last batch of a burst, with nothing more on its way, asks at once (clusters.tasks).
RECONCILE_NUDGE_DELAY_SECONDS = env_float("RECONCILE_NUDGE_DELAY_SECONDS", 0.5)
# A coalesced pass asked for sooner than this after the last one started waits until
# then (clusters.rows.enqueue): under a stream of nudges each pass takes a larger batch, and
# a pass's fixed cost (its snapshot of the whole fleet) is paid a bounded number of times
# per second, not once per request. A nudge on a quiet system starts a pass at once
# (docs/benchmarks.md, end to end, shows the effect).
ADMISSION_PASS_INTERVAL_SECONDS = env_float("ADMISSION_PASS_INTERVAL_SECONDS", 0.5)
RECONCILE_PASS_INTERVAL_SECONDS = env_float("RECONCILE_PASS_INTERVAL_SECONDS", 0.0)
# With several members, a reconcile pass waits at most this long for each member's pass
# (clusters.engine.member_passes); one still running goes on alone, and the next passes
# over the other members start without waiting for it.
RECONCILE_MEMBER_WAIT_SECONDS = env_float("RECONCILE_MEMBER_WAIT_SECONDS", 2.0)
# The same for the provision pass over rows marked for a step (deletions, suspensions,
# jobs' RayJobs), so that a burst of deletes shares passes instead of one per row.
PROVISION_PASS_INTERVAL_SECONDS = env_float("PROVISION_PASS_INTERVAL_SECONDS", 0.2)
# A reconcile pass folds only the rows whose row or objects changed since a fold that
# changed nothing (clusters.engine.foldmemo); this often it folds every row again, as an
# informer resyncs.
RECONCILE_FULL_PASS_SECONDS = env_float("RECONCILE_FULL_PASS_SECONDS", 300.0)
# Reconcile passes read informers' caches (a LIST, then a WATCH, per kind; kept by the
# worker process: clusters.engine.informers) instead of listing every kind each time.
# A pass waits at most RECONCILE_WATCH_WAIT_SECONDS for the caches to reach the API
# server's version as of its start; a watch open this long is taken to have delivered
# every write older than RECONCILE_WATCH_GRACE_SECONDS; changes ask for a pass at most
# RECONCILE_WATCH_NUDGE_SECONDS apart (0: only beat's and the engine's nudges).
RECONCILE_WATCH = env_bool("RECONCILE_WATCH", True)
RECONCILE_WATCH_WAIT_SECONDS = env_float("RECONCILE_WATCH_WAIT_SECONDS", 0.1)
RECONCILE_WATCH_GRACE_SECONDS = env_float("RECONCILE_WATCH_GRACE_SECONDS", 2.0)
RECONCILE_WATCH_NUDGE_SECONDS = env_float("RECONCILE_WATCH_NUDGE_SECONDS", 0.5)
# A request passed over by smaller ones for this long starts holding its pool (bounded
# wait); a borrower's cluster chosen for reclaim is warned this long before suspension.
ADMISSION_AGING_SECONDS = env_float("ADMISSION_AGING_SECONDS", 3600.0)
RECLAIM_GRACE_SECONDS = env_float("RECLAIM_GRACE_SECONDS", 900.0)
# Usage-decayed fair share (docs/capacity.md): GPU-hours held this many hours ago weigh
# half in the queue's order between tenants and between a tenant's engineers; 0: off,
# the order weighs only what tenants hold now.
FAIR_SHARE_HALF_LIFE_HOURS = env_float("FAIR_SHARE_HALF_LIFE_HOURS", 0.0)
if FAIR_SHARE_HALF_LIFE_HOURS < 0:
    raise ImproperlyConfigured("FAIR_SHARE_HALF_LIFE_HOURS must be 0 (off) or more.")
# A running cluster this close to its expiry gets a warning event (once per extension).
EXPIRY_WARNING_MINUTES = env_int("EXPIRY_WARNING_MINUTES", 30, minimum=0)
# A row waiting on a provisioning step with no progress for this long is re-nudged.
SWEEP_STALE_SECONDS = env_float("SWEEP_STALE_SECONDS", 30.0)
# Idle reclaim (docs/idle.md): how often each ready cluster's activity is read from Ray,
# and how long after the idle warning an idle cluster is suspended. The idle threshold
# itself is the tenant's policy (``Tenant.idle_suspend_minutes``).
ACTIVITY_CHECK_SECONDS = env_float("ACTIVITY_CHECK_SECONDS", 60.0)
IDLE_GRACE_MINUTES = env_float("IDLE_GRACE_MINUTES", 15.0)
# GPU utilisation (docs/gpu-utilization.md): read from each node's DCGM exporter through
# the API server's node proxy on DCGM_EXPORTER_PORT, or from this Prometheus (query API)
# when set; samples are kept GPU_SAMPLE_RETENTION_HOURS.
PROMETHEUS_URL = env_str("PROMETHEUS_URL", "")
DCGM_EXPORTER_PORT = env_int("DCGM_EXPORTER_PORT", 9400, minimum=1)
GPU_SAMPLE_RETENTION_HOURS = env_int("GPU_SAMPLE_RETENTION_HOURS", 24, minimum=1)
# Monthly GPU-hour budgets (Tenant.monthly_gpu_hour_budget): at 100% of its budget a
# tenant's pages say so, and with "deprioritise" its new dev requests also queue at the
# lowest priority (CLUSTER_PRIORITY_MIN) until the month turns; "warn" only warns.
BUDGET_POLICY = env_str("BUDGET_POLICY", "warn")
if BUDGET_POLICY not in ("warn", "deprioritise"):
    raise ImproperlyConfigured(
        f"BUDGET_POLICY must be 'warn' or 'deprioritise', not {BUDGET_POLICY!r}."
    )
# Showback (docs/cost.md): the currency of FlavorPrice and CostCap amounts (an ISO 4217
# code, shown beside every cost), and how often money caps are checked for soft notices.
COST_CURRENCY = env_str("COST_CURRENCY", "USD")
COST_CAP_CHECK_SECONDS = env_float("COST_CAP_CHECK_SECONDS", 900.0)
# The range of a request's priority, which tenant admins set (higher goes first).
CLUSTER_PRIORITY_MIN = -100
CLUSTER_PRIORITY_MAX = 100
