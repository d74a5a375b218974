"""The real stack a fault suite runs against, and the audit every suite reports.

A :class:`Rig` is kubesim over HTTP (in this process, so that a suite can inject faults
and restart it), a Celery worker with a prefork pool and Celery beat as separate
processes on Redis, all pointed at one PostgreSQL database. ``make reliability`` builds
it on a database of its own (:func:`standalone`); the quick versions in ``make test``
build it on the test database (``tests/reliability/conftest.py``). :func:`audit` counts
what the target says must be nothing: requests lost, duplicate and orphaned Kubernetes
objects, quota-ledger drift, usage spans left open.
"""

from __future__ import annotations

import email
import os
import socket
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from benchmarks.support import CeleryProcess, engine_env

MANAGED = "app.kubernetes.io/managed-by=gangway"
CLUSTER_ID = "gangway.dev/cluster-id"


@dataclass
class Rig:
    """kubesim, a prefork worker and beat; the suite's process is the web app's side."""

    sim: Any  # kubesim.KubeSim
    worker: CeleryProcess
    beat: CeleryProcess
    var: Path

    def stop(self) -> None:
        self.worker.stop()
        self.beat.stop()


def build_rig(*, sim: Any, database_url: str, var: Path, **env: str) -> Rig:
    """Start a prefork worker (two children) and beat on a queue of their own."""
    from django.conf import settings

    from controlplane.celery import app

    queue = f"rel-{uuid.uuid4().hex[:8]}"
    app.conf.task_default_queue = queue
    environment = engine_env(
        database_url=database_url,
        kubeconfig=settings.KUBECONFIG,
        queue=queue,
        var_dir=str(var),
        RAY_IMAGE_ALLOWLIST=",".join(settings.RAY_IMAGE_ALLOWLIST),
        **env,
    )
    worker = CeleryProcess(
        environment, var / "worker.log", pool="prefork", concurrency=2, beat=False
    )
    beat = CeleryProcess(environment, var / "beat.log", role="beat")
    worker.start()
    beat.start()
    return Rig(sim=sim, worker=worker, beat=beat, var=var)


@contextmanager
def standalone(suffix: str, **env: str) -> Iterator[Rig]:
    """``make reliability``'s rig: database ``<name>_<suffix>`` (emptied), kubesim, worker
    and beat; stopped after."""
    import tempfile

    from django.conf import settings

    from benchmarks.support import setup_django, truncate_product_tables

    url = setup_django(suffix)
    truncate_product_tables()
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE notifications_delivery, auth_user RESTART IDENTITY CASCADE")
    from kubesim import KubeSim

    var = Path(tempfile.mkdtemp(prefix=f"gangway-{suffix}-"))
    sim = KubeSim(fleet=None, port=0, startup_delay=0.0).start()
    sim.write_kubeconfig(str(var / "kubeconfig"))
    previous = settings.KUBECONFIG
    settings.KUBECONFIG = str(var / "kubeconfig")
    rig = build_rig(sim=sim, database_url=url, var=var, **env)
    try:
        yield rig
    finally:
        rig.stop()
        sim.stop()
        settings.KUBECONFIG = previous


@dataclass
class People:
    """The tenant a suite works in: an admin with an email address, roomy quotas."""

    tenant: Any
    admin: Any
    h100: Any


def seed(*, gpus: int = 64) -> People:
    """A tenant ``rel`` with an h100 quota of ``gpus`` and per-user caps out of the way."""
    from django.contrib.auth import get_user_model

    from tenants.models import GpuFlavor

    h100, _ = GpuFlavor.objects.get_or_create(
        name="h100",
        defaults={
            "gpu_product": "NVIDIA-H100-80GB-HBM3",
            "gpus_per_node": 8,
            "cpu_per_node": 192,
            "memory_per_node_gib": 1800,
            "node_count": 16,
        },
    )
    admin = get_user_model().objects.create_user(
        username="rel-admin", email="rel-admin@example.com", password=uuid.uuid4().hex
    )
    people = People(tenant=None, admin=admin, h100=h100)
    people.tenant = another_tenant(people, "rel", gpus=gpus)
    return people


def another_tenant(people: People, slug: str, *, gpus: int = 64) -> Any:
    """A tenant ``slug`` (namespace ``gw-<slug>``) as :func:`seed`'s, administered by
    the same admin."""
    from tenants.models import Membership, Quota, Role, Tenant

    tenant = Tenant.objects.create(
        slug=slug,
        name=f"Reliability {slug}",
        namespace=f"gw-{slug}",
        cpu_quota=100000,
        memory_quota_gib=1000000,
        max_dev_clusters_per_user=1000,
        max_dev_gpus_per_user=1000,
    )
    Quota.objects.create(tenant=tenant, flavor=people.h100, gpus=gpus, borrow_limit=0)
    Membership.objects.create(tenant=tenant, user=people.admin, role=Role.ADMIN)
    return tenant


def converge(predicate: Callable[[], Any], *, timeout: float, hold: float = 0.0) -> float | None:
    """Seconds until ``predicate`` holds (and has held for ``hold`` seconds, for states a
    row may pass through on its way), or ``None`` if it did not within ``timeout``."""
    started = time.monotonic()
    since: float | None = None
    while time.monotonic() - started < timeout:
        now = time.monotonic()
        if not predicate():
            since = None
        elif since is None:
            since = now
        if since is not None and now - since >= hold:
            return since - started
        time.sleep(0.2)
    return None


def pods_of(pks: list[int]) -> int:
    """How many pods of the requests ``pks`` kubesim still has."""
    from clusters.kube.gateway import get_gateway

    wanted = {str(pk) for pk in pks}
    pods = get_gateway().list("v1", "Pod", label_selector=CLUSTER_ID)
    return sum(1 for pod in pods if pod["metadata"]["labels"][CLUSTER_ID] in wanted)


def states(pks: list[int]) -> Counter[str]:
    from clusters.models import ClusterRequest

    return Counter(
        ClusterRequest.objects.unscoped().filter(pk__in=pks).values_list("state", flat=True)
    )


@dataclass
class Audit:
    """What must be nothing after the faults (the figures of every fault suite)."""

    lost: int = 0  # requests not in the state they were asked for
    duplicates: int = 0  # RayClusters/RayJobs beyond one per request
    orphans: int = 0  # managed objects (or pods) no live request wants
    drift: Decimal = Decimal(0)  # |GPUs the ledger holds - GPUs of requests that hold|
    open_spans: int = 0  # usage spans of requests that hold no GPUs, still open
    details: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.lost or self.duplicates or self.orphans or self.drift or self.open_spans)

    def add(self, other: Audit) -> None:
        self.lost += other.lost
        self.duplicates += other.duplicates
        self.orphans += other.orphans
        self.drift += other.drift
        self.open_spans += other.open_spans
        self.details += other.details


def audit(expected: dict[int, str]) -> Audit:
    """Compare the rows and Kubernetes with ``expected`` (request id -> the state it
    should have reached) once the stack has converged."""
    from clusters.domain.states import HOLDS_QUOTA
    from clusters.models import ClusterRequest, UsageSpan

    result = Audit()
    rows = {r.pk: r for r in ClusterRequest.objects.unscoped().filter(pk__in=list(expected))}
    for pk, state in expected.items():
        row = rows.get(pk)
        if row is None or row.state != state:
            result.lost += 1
            result.details.append(f"request {pk}: {row.state if row else 'missing'} != {state}")
    _audit_objects(rows, result)
    held = sum((r.gpus for r in rows.values() if r.holds_gpus), Decimal(0))
    holding = sum((r.gpus for r in rows.values() if r.state in HOLDS_QUOTA), Decimal(0))
    result.drift = abs(held - holding)
    if result.drift:
        result.details.append(f"ledger holds {held} GPUs, requests that hold have {holding}")
    not_holding = [pk for pk, r in rows.items() if not r.holds_gpus]
    result.open_spans = UsageSpan.objects.filter(
        cluster_id__in=not_holding, ended_at__isnull=True
    ).count()
    if result.open_spans:
        result.details.append(f"{result.open_spans} usage spans open on released requests")
    return result


def diagnose(rig: Rig, rows: list[Any], *, log_lines: int = 15) -> str:
    """What a suite that did not converge prints of each stuck request: its row, what
    Kubernetes holds of it, and the worker's last log lines that name it. CI keeps
    nothing else of a failed run."""
    from clusters.kube.gateway import get_gateway

    gw = get_gateway()
    worker_log = (rig.var / "worker.log").read_text(errors="replace").splitlines()
    found = []
    for row in rows:
        selector = f"{CLUSTER_ID}={row.pk}"
        objects = [
            f"{o['kind']} {o['metadata']['name']} {o.get('status') or {}}"
            for kind in ("RayCluster", "RayJob")
            for o in gw.list("ray.io/v1", kind, label_selector=selector)
        ]
        pods = [
            f"{p['metadata']['name']} {(p.get('status') or {}).get('phase')}"
            for p in gw.list("v1", "Pod", label_selector=selector)
        ]
        named = [line for line in worker_log if row.name in line][-log_lines:]
        found.append(
            f"request {row.pk} {row.name}: {row.state} ({row.state_reason}), holds GPUs "
            f"{row.holds_gpus}, last error {row.last_error!r}; objects {objects}; pods {pods}; "
            "worker log:\n" + "\n".join(named)
        )
    return "\n".join(found)


def _audit_objects(rows: dict[int, Any], result: Audit) -> None:
    """Duplicates and orphans among the managed RayClusters, RayJobs and pods."""
    from clusters.kinds.raycluster.states import WANTS_RAYCLUSTER
    from clusters.kube.gateway import get_gateway

    gw = get_gateway()
    rcs = gw.list("ray.io/v1", "RayCluster", label_selector=MANAGED)
    rjs = gw.list("ray.io/v1", "RayJob", label_selector=MANAGED)
    for kind, objects in (("RayCluster", rcs), ("RayJob", rjs)):
        per_row = Counter(o["metadata"].get("labels", {}).get(CLUSTER_ID) for o in objects)
        for pk_label, count in per_row.items():
            if count > 1:
                result.duplicates += count - 1
                result.details.append(f"{count} {kind}s of request {pk_label}")
    for rc in rcs:
        if any(ref.get("kind") == "RayJob" for ref in rc["metadata"].get("ownerReferences") or []):
            continue  # a job's cluster goes with its RayJob
        row = rows.get(int(rc["metadata"]["labels"].get(CLUSTER_ID, 0) or 0))
        if row is None or row.state not in WANTS_RAYCLUSTER:
            result.orphans += 1
            result.details.append(f"orphan RayCluster {rc['metadata']['name']}")
    for rj in rjs:
        row = rows.get(int(rj["metadata"]["labels"].get(CLUSTER_ID, 0) or 0))
        if row is None or row.state == "deleted":
            result.orphans += 1
            result.details.append(f"orphan RayJob {rj['metadata']['name']}")
    for pod in gw.list("v1", "Pod", label_selector=CLUSTER_ID):
        row = rows.get(int(pod["metadata"]["labels"][CLUSTER_ID]))
        if row is not None and row.state in ("deleted", "suspended"):
            result.orphans += 1
            result.details.append(f"pod {pod['metadata']['name']} of a {row.state} request")


class Inbox:
    """A real SMTP server on loopback (aiosmtpd) that keeps every message's delivery id."""

    def __init__(self) -> None:
        import logging

        from aiosmtpd.controller import Controller

        logging.getLogger("mail.log").setLevel(logging.WARNING)  # a line per SMTP verb
        self.ids: list[str] = []
        with socket.socket() as probe:  # a free port (the controller checks it by connecting)
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.controller = Controller(self, hostname="127.0.0.1", port=self.port)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content)
        self.ids.append(str(message["X-Gangway-Delivery"]))
        return "250 OK"

    def env(self) -> dict[str, str]:
        """What the worker reads to mail through this server, with quick delivery beats."""
        return {
            "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "EMAIL_HOST": "127.0.0.1",
            "EMAIL_PORT": str(self.port),
            "EMAIL_USE_TLS": "0",
            "EMAIL_TIMEOUT": "2",
            "DEFAULT_FROM_EMAIL": "gangway@example.com",
            "NOTIFY_DISPATCH_INTERVAL_SECONDS": "0.5",
            "NOTIFY_SWEEP_INTERVAL_SECONDS": "1",
            "NOTIFY_STALE_SECONDS": "3",
            "NOTIFY_BACKOFF_BASE_SECONDS": "0.2",
        }


def notification_figures(inbox: Inbox) -> tuple[int, int, int]:
    """(deliveries, lost, sent twice): a delivery is lost when its row is not ``sent`` or
    the server never got it, sent twice when the server got its id more than once."""
    from notifications.models import Delivery, DeliveryStatus

    rows = list(Delivery.objects.filter(channel="email").values_list("delivery_id", "status"))
    got = Counter(inbox.ids)
    lost = sum(1 for did, status in rows if status != DeliveryStatus.SENT or not got[str(did)])
    twice = sum(1 for did, _ in rows if got[str(did)] > 1)
    return len(rows), lost, twice


def seconds(values: list[float]) -> str:
    """'median x s, max y s' of convergence times (or 'n/a')."""
    import statistics

    if not values:
        return "n/a"
    return f"median {statistics.median(values):.1f} s, max {max(values):.1f} s"


def loadavg() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (1 min), {five:.1f} (5 min)"
