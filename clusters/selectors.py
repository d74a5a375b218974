"""Reads about cluster requests, shared by the API, the dashboard and tasks."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Count, F, Prefetch, Sum
from django.utils import timezone

from clusters.domain.states import State
from clusters.domain.workload_kinds import DEFAULT_WORKLOAD, kind_named, kind_of
from clusters.engine import idle, member_health
from clusters.models import (
    ClusterEvent,
    ClusterRequest,
    ClusterRequestQuerySet,
    GpuSample,
    UsageSpan,
)
from clusters.rows import usage
from tenants.models import Quota, Tenant


def cluster_list(
    *, tenant: Tenant, workload: str | None = DEFAULT_WORKLOAD
) -> ClusterRequestQuerySet:
    """A tenant's requests of one kind (``workload``; every kind: ``None``) with what their
    representation needs, in one query."""
    # Through the tenant's reverse relation rather than ``for_tenant``: the same filter,
    # and every row's ``tenant`` is this instance instead of a copy joined in per row.
    queryset: ClusterRequestQuerySet = tenant.clusters.all()
    if workload is not None:
        queryset = queryset.filter(workload=workload)
    # kube_cluster: whether it is stale; priority_class: its class, shown with it.
    related = ["flavor", "owner", "kube_cluster", "priority_class"]
    if workload is not None:
        kind = kind_named(workload)
        related += kind.list_related
        if kind.list_prefetch:
            queryset = queryset.prefetch_related(*kind.list_prefetch)
    # The home member's reachability, for the rows not placed yet (whether they are stale).
    queryset = queryset.annotate(**member_health.home_annotations())
    return queryset.select_related(*related).order_by("-created_at", "-id")


def gpu_hours_of(request: ClusterRequest) -> Decimal:
    """GPU-hours a request has used so far: the sum of its usage spans (an open span up
    to now). Reads the prefetched ``usage_spans`` when the selector prefetched them."""
    now = timezone.now()
    total = Decimal(0)
    for span in request.usage_spans.all():
        seconds = Decimal(((span.ended_at or now) - span.started_at).total_seconds())
        total += span.gpus * seconds / Decimal(3600)
    return total


# How much history a cluster's API representation carries: the newest events only. The
# whole history grows without bound (every reconcile reason is an event); the dashboard's
# page shows all of it.
EVENTS_SHOWN = 20


def _newest_events(count: int, to_attr: str) -> Prefetch[Any]:
    # A sliced prefetch: Django numbers each cluster's events newest first with a window
    # function and keeps the first ``count`` of every cluster, all in one query.
    return Prefetch(
        "events", queryset=ClusterEvent.objects.order_by("-at", "-id")[:count], to_attr=to_attr
    )


def cluster_list_items(
    *, tenant: Tenant, workload: str = DEFAULT_WORKLOAD
) -> ClusterRequestQuerySet:
    """:func:`cluster_list` for the API's list: each row also carries its newest event
    (``latest_events``, a list of at most one, newest first) in one query for the page,
    never its history."""
    queryset = cluster_list(tenant=tenant, workload=workload)
    if not connection.features.can_distinct_on_fields:  # SQLite, for `make run`
        return queryset.prefetch_related(_newest_events(1, "latest_events"))
    # DISTINCT ON keeps each cluster's first event in (cluster, newest first) order: the
    # same rows as a sliced prefetch of one, without its window function, whose query
    # cost more to compile than to run.
    newest = ClusterEvent.objects.order_by("cluster_id", "-at", "-id").distinct("cluster_id")
    return queryset.prefetch_related(Prefetch("events", queryset=newest, to_attr="latest_events"))


def cluster_detail(*, tenant: Tenant, pk: int, workload: str = DEFAULT_WORKLOAD) -> ClusterRequest:
    """One row with its newest :data:`EVENTS_SHOWN` events (a write's answer; a plain
    ``LIMIT``, as a sliced prefetch's window query costs more to compile)."""
    cluster: ClusterRequest = cluster_list(tenant=tenant, workload=workload).get(pk=pk)
    return with_recent_events(cluster)


def with_recent_events(cluster: ClusterRequest) -> ClusterRequest:
    """``cluster`` with its newest :data:`EVENTS_SHOWN` events read as ``recent_events``,
    newest first, as :func:`cluster_detail` gives them (one query)."""
    newest = ClusterEvent.objects.filter(cluster=cluster).order_by("-at", "-id")
    cluster.recent_events = list(newest[:EVENTS_SHOWN])  # type: ignore[attr-defined]
    return cluster


def cluster_for_page(
    *, tenant: Tenant, name: str, pk: int | None = None, workload: str | None = DEFAULT_WORKLOAD
) -> ClusterRequest | None:
    """The request of a kind (``workload``; any: ``None``) a page about ``name`` shows,
    deleted ones included (their final record), with its whole event history prefetched
    (``events``).

    A name is unique among clusters that are not deleted, but several deleted ones may
    have had it: without ``pk`` the live one wins, else the most recently deleted.
    """
    history = Prefetch("events", queryset=ClusterEvent.objects.order_by("at", "id"))
    queryset = (
        cluster_list(tenant=tenant, workload=workload).prefetch_related(history).filter(name=name)
    )
    if pk is not None:
        return queryset.filter(pk=pk).first()
    live = queryset.not_deleted().first()
    return live or queryset.order_by(F("deleted_at").desc(nulls_last=True), "-id").first()


def cluster_gpu_hours(cluster: ClusterRequest) -> Decimal:
    """GPU-hours the cluster has used so far, over every admission (open spans to now)."""

    now = timezone.now()
    total = Decimal(0)
    for span in (
        UsageSpan.objects.for_tenant(cluster.tenant)
        .filter(cluster=cluster)
        .only("gpus", "started_at", "ended_at")
    ):
        seconds = Decimal(((span.ended_at or now) - span.started_at).total_seconds())
        total += span.gpus * max(seconds, Decimal(0)) / Decimal(3600)
    return round(total, 2)


def cluster_endpoints(cluster: ClusterRequest, *, base_url: str = "") -> dict[str, Any] | None:
    """How to reach a ready cluster, from a laptop and from inside the cluster.

    From anywhere the control plane is: the Ray dashboard through the product's proxy
    (``dashboard_proxy_url`` for the browser, ``api_proxy_url`` for a token, e.g. Ray's
    Jobs SDK, with ``jobs_snippet``). With kubectl access to the namespace:
    ``port_forward``. From pods inside the cluster: the in-cluster service names (the
    tenant's NetworkPolicies admit the control plane's namespace and the tenant's own
    pods to these ports, no one else). ``base_url`` (scheme and host, no slash at the
    end) makes the proxy URLs absolute.
    """
    if cluster.state != State.READY:
        return None
    service = f"{cluster.name}-head-svc"
    host = f"{service}.{cluster.namespace}.svc"
    client_address = f"ray://{host}:10001"
    slug = cluster.tenant.slug
    api_proxy = f"{base_url}/api/v1/tenants/{slug}/clusters/{cluster.name}/ray/"
    return {
        "dashboard_url": f"http://{host}:8265",
        "client_address": client_address,
        "snippet": f'import ray\nray.init("{client_address}")',
        "dashboard_proxy_url": f"{base_url}/t/{slug}/clusters/{cluster.name}/ray/",
        "api_proxy_url": api_proxy,
        "port_forward": (
            f"kubectl port-forward -n {cluster.namespace} service/{service} 8265:8265 10001:10001"
        ),
        "jobs_snippet": (
            "import os\n"
            "from ray.job_submission import JobSubmissionClient\n\n"
            "client = JobSubmissionClient(\n"
            f'    "{api_proxy}",\n'
            '    headers={"Authorization": f"Token {os.environ[\'GANGWAY_TOKEN\']}"},\n'
            ")\n"
            "job = client.submit_job(entrypoint=\"python -c 'import ray; ray.init(); "
            "print(ray.cluster_resources())'\")\n"
            "print(client.get_job_status(job))"
        ),
        "port_forward_snippet": 'import ray\nray.init("ray://localhost:10001")',
        # Opened by the owner and the tenant's admins (docs/notebooks.md).
        "notebook_url": (
            f"{base_url}/t/{slug}/clusters/{cluster.name}/notebook/" if cluster.notebook else None
        ),
    }


def idle_minutes(last_active_at: Any, now: Any) -> int:
    """Whole minutes since ``last_active_at`` (0 if ahead): what the clock alone moves."""
    return max(int((now - last_active_at).total_seconds() // 60), 0)


def cluster_activity(cluster: ClusterRequest, *, now: Any = None) -> dict[str, Any] | None:
    """A ready cluster's use as last read from Ray: when it was last active, for how long
    it has been idle, and the idle policy's next step (warning, suspension). ``None`` for
    a cluster that is not ready (nothing runs to be idle)."""
    if cluster.state != State.READY or not kind_of(cluster).interactive:
        return None
    now = now or timezone.now()
    last = cluster.last_active_at or cluster.ready_at
    # In use at the last reading: the check recorded "now" as the last activity.
    active = cluster.activity_checked_at is not None and last == cluster.activity_checked_at
    return {
        "active": active,
        "last_active_at": last,
        "idle_minutes": idle_minutes(last, now) if last and not active else 0,
        "checked_at": cluster.activity_checked_at,
        "note": cluster.activity_note,
        "idle_suspend_minutes": (
            cluster.tenant.idle_suspend_minutes if idle.policy_applies(cluster) else None
        ),
        "warned_at": cluster.idle_warned_at,
        "suspend_at": idle.idle_deadline(cluster),
    }


# Readings shown per worker GPU: an hour at the default ACTIVITY_CHECK_SECONDS.
GPU_READINGS_SHOWN = 60


def cluster_gpu_utilization(
    cluster: ClusterRequest, *, readings: int = GPU_READINGS_SHOWN
) -> list[dict[str, Any]]:
    """The cluster's GPU utilisation over its last ``readings`` readings, per worker GPU
    (pod, UUID), oldest sample first, with the newest values on top; ``[]`` before any
    reading (docs/gpu-utilization.md)."""
    samples = GpuSample.objects.filter(cluster_id=cluster.pk)
    moments = list(samples.order_by("-at").values_list("at", flat=True).distinct()[:readings])
    if not moments:
        return []
    by_gpu: dict[tuple[str, str], list[GpuSample]] = {}
    for s in samples.filter(at__gte=moments[-1]).order_by("at", "pk"):
        by_gpu.setdefault((s.pod, s.gpu_uuid), []).append(s)
    return [
        {
            "pod": pod,
            "gpu_uuid": uuid,
            "utilization": rows[-1].utilization,
            "memory_used_mib": rows[-1].memory_used_mib,
            "read_at": rows[-1].at,
            "samples": [
                {"at": r.at, "utilization": r.utilization, "memory_used_mib": r.memory_used_mib}
                for r in rows
            ],
        }
        for (pod, uuid), rows in sorted(by_gpu.items())
    ]


def queue_list(*, tenant: Tenant | None = None) -> ClusterRequestQuerySet:
    """Waiting requests in queue order (a tenant's, or every tenant's when ``None``)."""

    qs = (
        ClusterRequest.objects.unscoped()
        if tenant is None
        else cluster_list(tenant=tenant, workload=None)
    )
    return (
        qs.filter(state=State.QUEUED)
        .select_related("tenant", "flavor", "owner", "priority_class")
        .order_by(
            F("queue_position").asc(nulls_last=True)
            if tenant is not None
            else F("queue_flavor_position").asc(nulls_last=True),
            "created_at",
            "id",
        )
    )


def _hours_by_user(
    buckets: dict[usage.Bucket, Decimal],
) -> tuple[Decimal, dict[str, Decimal], dict[str, Decimal], dict[tuple[str, str], Decimal]]:
    """GPU-hours of per-day buckets (:func:`clusters.rows.usage.hours_by_day`) in total, by
    user, by flavor and by both."""
    by_user: dict[str, Decimal] = defaultdict(Decimal)
    by_flavor: dict[str, Decimal] = defaultdict(Decimal)
    by_pair: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    total = Decimal(0)
    for (_day, _tenant, user, flavor), gpu_hours in buckets.items():
        total += gpu_hours
        by_user[user] += gpu_hours
        by_flavor[flavor] += gpu_hours
        by_pair[(user, flavor)] += gpu_hours
    return total, by_user, by_flavor, by_pair


def usage_summary(
    *,
    tenant: Tenant,
    since: Any,
    until: Any,
    hours: tuple[dict[usage.Bucket, Decimal], dict[usage.Bucket, Decimal]] | None = None,
) -> dict[str, Any]:
    """GPU-hours of a tenant between ``since`` and ``until``, by user, flavor and both,
    each split into active and idle (held while Ray showed no use: the idle spans).

    Each span counts for the part of it inside the period; open spans run to ``until``
    (or now, if earlier). ``hours`` are the tenant's usage and idle buckets of the period
    (:func:`clusters.rows.usage.period_hours`) when the caller has read them already, for
    its daily rows too; otherwise they are read here (two queries).
    """

    used, idled = hours or usage.period_hours(tenant=tenant, since=since, until=until)
    total, by_user, by_flavor, by_pair = _hours_by_user(used)
    idle_total, idle_user, idle_flavor, idle_pair = _hours_by_user(idled)

    def rounded(value: Decimal) -> float:
        return float(round(value, 3))

    def split(used: Decimal, idle: Decimal) -> dict[str, float]:
        idle = min(idle, used)  # an idle span never outlasts the GPUs it was idle with
        return {
            "gpu_hours": rounded(used),
            "active_gpu_hours": rounded(used - idle),
            "idle_gpu_hours": rounded(idle),
        }

    return {
        "tenant": tenant.slug,
        "since": since,
        "until": until,
        "total_gpu_hours": rounded(total),
        "active_gpu_hours": split(total, idle_total)["active_gpu_hours"],
        "idle_gpu_hours": split(total, idle_total)["idle_gpu_hours"],
        "by_user": [
            {"user": user, **split(v, idle_user[user])} for user, v in sorted(by_user.items())
        ],
        "by_flavor": [
            {"flavor": flavor, **split(v, idle_flavor[flavor])}
            for flavor, v in sorted(by_flavor.items())
        ],
        "by_user_and_flavor": [
            {"user": user, "flavor": flavor, **split(v, idle_pair[(user, flavor)])}
            for (user, flavor), v in sorted(by_pair.items())
        ],
    }


def _meter(held: Any, quota: int) -> int:
    return min(100, round(100 * float(held) / quota)) if quota else 0


def tenant_overview(*, tenants: list[Tenant]) -> dict[int, dict[str, Any]]:
    """For each tenant: what it holds against its quotas, and its live requests by
    ``workload`` and state (``states``: ``{workload: {state: count}}``).

    Two grouped queries plus one for the quotas whatever the number of tenants, for the
    dashboard's home page. Keys are tenant ids; ``flavors`` is a list of
    ``{"flavor", "held", "quota", "percent", "borrowing"}`` in flavor order (GPUs), and
    ``resources`` one ``{"label", "held", "quota", "unit", "percent"}`` each for CPU and
    memory when the tenant has that quota, since admission refuses what would pass it.
    """

    ids = [tenant.pk for tenant in tenants]
    held: dict[tuple[int, int], Any] = {}
    cpu: dict[int, Decimal] = dict.fromkeys(ids, Decimal(0))
    memory: dict[int, Decimal] = dict.fromkeys(ids, Decimal(0))
    for row in (
        ClusterRequest.objects.unscoped()
        .filter(tenant_id__in=ids, holds_gpus=True)
        .values("tenant_id", "flavor_id")
        .annotate(gpus=Sum("gpus"), cpu=Sum("cpu"), memory=Sum("memory_gib"))
    ):
        held[row["tenant_id"], row["flavor_id"]] = row["gpus"]
        cpu[row["tenant_id"]] += row["cpu"] or 0
        memory[row["tenant_id"]] += row["memory"] or 0
    out: dict[int, dict[str, Any]] = {
        t.pk: {"flavors": [], "states": {}, "resources": []} for t in tenants
    }
    for tenant in tenants:
        for label, amount, limit, unit in (
            ("CPU", cpu[tenant.pk], tenant.cpu_quota, "CPU"),
            ("memory", memory[tenant.pk], tenant.memory_quota_gib, "GiB"),
        ):
            if limit:
                out[tenant.pk]["resources"].append(
                    {
                        "label": label,
                        "held": amount,
                        "quota": limit,
                        "unit": unit,
                        "percent": _meter(amount, limit),
                    }
                )
    quotas = (
        Quota.objects.unscoped()
        .filter(tenant_id__in=ids)
        .select_related("flavor")
        .order_by("flavor__name")
    )
    for quota in quotas:
        used = held.get((quota.tenant_id, quota.flavor_id), 0) or 0
        out[quota.tenant_id]["flavors"].append(
            {
                "flavor": quota.flavor,
                "held": used,
                "quota": quota.gpus,
                "percent": _meter(used, quota.gpus),
                # Held above nominal: borrowed from the cohort (the home page's orange).
                "borrowing": used > quota.gpus,
            }
        )
    for row in (
        ClusterRequest.objects.unscoped()
        .filter(tenant_id__in=ids)
        .not_deleted()
        .values("tenant_id", "workload", "state")
        .annotate(n=Count("id"))
        .order_by()
    ):
        states = out[row["tenant_id"]]["states"].setdefault(row["workload"], {})
        states[row["state"]] = row["n"]
    return out


def clusters_of_owner(*, user: Any) -> ClusterRequestQuerySet:
    """The user's own live clusters in every tenant they can see (the home page)."""
    return (
        ClusterRequest.objects.visible_to(user)
        .filter(owner=user)
        .not_deleted()
        .select_related("tenant", "flavor", "owner", "priority_class")
        .order_by("-created_at", "-id")
    )


def staleness(request: ClusterRequest) -> tuple[bool, datetime | None]:
    """Whether the request's state is stale (the member of the fleet it runs on, the home
    member for a row not placed yet, is unreachable) and since when it was last read
    there (:func:`clusters.engine.member_health.staleness`)."""
    return member_health.staleness(request)
