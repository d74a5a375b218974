"""Backup and restore: the documented procedure (docs/operations.md) while clusters exist.

Clusters are provisioned, the database backed up with ``pg_dump``, life goes on, and the
backup is restored into a fresh database, so that Kubernetes disagrees with the restored rows
both ways. ``manage.py reconcile --dry-run`` must list what the engine would do and change
nothing; the workers then converge Kubernetes to the rows without deleting anything they want.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from reliability.rig import Audit, People, Rig, audit, converge

FULL = {"before": 12, "after": 6, "deleted": 4}
QUICK = {"before": 3, "after": 2, "deleted": 1}
CONVERGE_TIMEOUT = 240.0
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Result:
    """The figures of one run."""

    backup_bytes: int = 0
    backup_seconds: float = 0.0
    restore_seconds: float = 0.0
    planned_deletes: list[str] = field(default_factory=list)
    planned_writes: list[str] = field(default_factory=list)
    unwanted: set[str] = field(default_factory=set)  # what Kubernetes ran, rows did not want
    missing: set[str] = field(default_factory=set)  # what the rows wanted, Kubernetes lacked
    wrong_deletes: list[str] = field(default_factory=list)
    dry_run_changed: bool = False
    convergence: float | None = None
    audit: Audit = field(default_factory=Audit)
    counts: dict[str, int] = field(default_factory=dict)


def _rc_names() -> set[str]:
    from clusters.kube.gateway import get_gateway

    return {
        rc["metadata"]["name"]
        for rc in get_gateway().list(
            "ray.io/v1", "RayCluster", label_selector="gangway.dev/cluster-id"
        )
    }


def _use_database(name: str) -> None:
    """Point this process's Django connection at database ``name``."""
    from django.conf import settings
    from django.db import connections

    connections.close_all()
    settings.DATABASES["default"]["NAME"] = name
    connections["default"].settings_dict["NAME"] = name


def exercise(rig: Rig, people: People, *, quick: bool, database_url: str) -> Result:
    """Run the procedure; see the module docstring. ``database_url`` is the live one."""
    import dj_database_url

    from benchmarks import support
    from clusters.models import ClusterRequest
    from clusters.requests import services
    from clusters.rows.spec import ClusterSpec

    plan = QUICK if quick else FULL
    result = Result(counts=dict(plan))

    def create(prefix: str, count: int) -> list[int]:
        return [
            services.cluster_request_create(
                actor=people.admin,
                tenant=people.tenant,
                spec=ClusterSpec(name=f"{prefix}-{i}", flavor=people.h100, workers=1),
            ).pk
            for i in range(count)
        ]

    def reached(pks: list[int], state: str) -> None:
        def done() -> bool:
            rows = ClusterRequest.objects.unscoped().filter(pk__in=pks, state=state)
            return rows.count() == len(pks)

        if converge(done, timeout=CONVERGE_TIMEOUT) is None:
            raise RuntimeError(f"{len(pks)} requests did not reach {state}")

    before = create("kept", plan["before"])
    reached(before, "ready")
    backup = rig.var / "gangway.dump"
    started = time.monotonic()
    subprocess.run(
        ["pg_dump", "--format=custom", "--no-owner", f"--file={backup}", database_url],
        check=True,
    )
    result.backup_seconds = time.monotonic() - started
    result.backup_bytes = backup.stat().st_size

    after = create("later", plan["after"])
    reached(after, "ready")
    gone = before[: plan["deleted"]]
    for row in ClusterRequest.objects.unscoped().filter(pk__in=gone):
        services.cluster_delete(actor=people.admin, cluster=row)
    reached(gone, "deleted")
    rig.stop()  # the procedure: no worker runs while the database is replaced

    parsed = dj_database_url.parse(database_url)
    live_name = str(parsed["NAME"])
    restored_name = f"{live_name}_restored"
    restored_url = f"{database_url.rsplit('/', 1)[0]}/{restored_name}"
    admin = support.admin_connection(database_url)
    with admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{restored_name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{restored_name}"')
    started = time.monotonic()
    subprocess.run(
        ["pg_restore", "--no-owner", "--exit-on-error", f"--dbname={restored_url}", str(backup)],
        check=True,
    )
    result.restore_seconds = time.monotonic() - started

    _use_database(restored_name)
    try:
        return _converge_restored(rig, result, before, restored_url)
    finally:
        _use_database(live_name)
        with support.admin_connection(restored_url) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{restored_name}" WITH (FORCE)')


def _converge_restored(rig: Rig, result: Result, before: list[int], url: str) -> Result:
    from django.conf import settings

    from clusters.models import ClusterRequest

    wanted = set(
        ClusterRequest.objects.unscoped().filter(pk__in=before).values_list("name", flat=True)
    )
    present = _rc_names()
    result.unwanted = present - wanted
    result.missing = wanted - present
    env = {**rig.worker.env, "DATABASE_URL": url, "KUBECONFIG": settings.KUBECONFIG}
    dry = subprocess.run(
        [sys.executable, "manage.py", "reconcile", "--dry-run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = dry.stdout.splitlines()
    result.planned_deletes = [ln for ln in lines if ln.startswith("would delete RayCluster")]
    result.planned_writes = [
        ln for ln in lines if ln.startswith("would write") and " RayCluster " in ln
    ]
    result.wrong_deletes = [ln for ln in result.planned_deletes if ln.rsplit("/", 1)[1] in wanted]
    result.dry_run_changed = _rc_names() != present

    rig.worker.env = rig.beat.env = env
    rig.worker.start()
    rig.beat.start()

    def converged() -> bool:
        ready = ClusterRequest.objects.unscoped().filter(pk__in=before, state="ready").count()
        return ready == len(before) and _rc_names() == wanted

    result.convergence = converge(converged, timeout=CONVERGE_TIMEOUT)
    result.audit = audit(dict.fromkeys(before, "ready"))
    rig.stop()
    return result


def section(result: Result, *, quick: bool) -> str:
    """The markdown section of ``docs/reliability.md``."""
    from reliability.rig import loadavg

    c = result.counts
    a = result.audit
    took = "did not converge" if result.convergence is None else f"{result.convergence:.1f} s"
    return "\n".join(
        [
            "## Backup and restore",
            "",
            f"`python -m reliability restore`: {c['before']} clusters provisioned; the "
            "database backed up with `pg_dump --format=custom`; then "
            f"{c['after']} more clusters provisioned and {c['deleted']} of the first deleted; "
            "the workers stopped; the backup restored into a fresh database with "
            "`pg_restore`; `manage.py reconcile --dry-run` run against it; the workers "
            "started on it. The procedure is in docs/operations.md.",
            "",
            "| Figure | Result |",
            "|---|---:|",
            f"| backup size, time | {result.backup_bytes / 1024:.0f} KiB, "
            f"{result.backup_seconds:.1f} s |",
            f"| restore time | {result.restore_seconds:.1f} s |",
            f"| RayClusters running that the restored rows do not know | {len(result.unwanted)} |",
            f"| RayClusters the restored rows want that were gone | {len(result.missing)} |",
            f"| RayCluster deletions the dry run listed | {len(result.planned_deletes)} |",
            f"| RayCluster writes the dry run listed | {len(result.planned_writes)} |",
            f"| listed deletions of objects the restored rows want | {len(result.wrong_deletes)} |",
            f"| objects the dry run changed | {'some' if result.dry_run_changed else 0} |",
            f"| time to converge on the restored rows | {took} |",
            f"| requests lost / duplicates / orphans | {a.lost} / {a.duplicates} / {a.orphans} |",
            f"| quota-ledger drift / open usage spans | {a.drift} / {a.open_spans} |",
            "",
            f"Load average at the end {loadavg()}.",
        ]
    )


def run(quick: bool) -> str:
    """``make reliability``'s entry point (its own database, kubesim, worker and beat)."""
    from reliability.rig import seed, standalone

    with standalone("rel_restore") as rig:
        result = exercise(rig, seed(), quick=quick, database_url=os.environ["DATABASE_URL"])
    return section(result, quick=quick)
