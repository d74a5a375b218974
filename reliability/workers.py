"""Worker faults: the Celery worker killed at random (seeded) points of the engine's work.

Rounds of: provisioning dev clusters, suspending half of them, resuming those, running
RayJobs, deleting everything; the owner is mailed (a real SMTP server on loopback) when a
cluster is ready, suspended, or a job finishes. While each phase is in flight the worker
gets one of three faults at random moments: SIGKILL of a pool child (the main process
forks a new one), SIGKILL of the main process (and so of its children), or SIGTERM (Celery's
warm shutdown), each followed by a restart when the worker is gone. Every Kubernetes call
takes 40 ms longer, so that faults land in the middle of real calls. After each phase the
stack must converge on its own: the figures are what it lost on the way.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from reliability.rig import (
    Audit,
    Inbox,
    People,
    Rig,
    audit,
    converge,
    diagnose,
    notification_figures,
    pods_of,
)

SEED = 20261124
KINDS = ("pool child SIGKILL", "main worker SIGKILL", "SIGTERM")
PHASES = ("provisioning", "suspension", "resumption", "job runs", "deletion")
# Full run: 6 rounds x 5 phases x 5 faults = 150 faults.
FULL = {"rounds": 6, "clusters": 6, "jobs": 3, "faults_per_phase": 5}
QUICK = {"rounds": 1, "clusters": 2, "jobs": 1, "faults_per_phase": 1}
CONVERGE_TIMEOUT = 240.0


@dataclass
class Result:
    """The figures of one run."""

    faults: Counter[tuple[str, str]] = field(default_factory=Counter)  # (phase, kind)
    convergence: list[float] = field(default_factory=list)
    unconverged: list[str] = field(default_factory=list)
    audit: Audit = field(default_factory=Audit)
    requests: int = 0
    deliveries: int = 0
    mail_lost: int = 0
    mail_twice: int = 0
    wall: float = 0.0

    @property
    def total_faults(self) -> int:
        return sum(self.faults.values())


def inject(rig: Rig, rng: random.Random, count: int, phase: str, result: Result) -> None:
    """``count`` faults at random moments (0.2-1.2 s apart, the first right away)."""
    for n in range(count):
        if n:
            time.sleep(rng.uniform(0.2, 1.2))
        kind = rng.choice(KINDS)
        if kind == KINDS[0] and not rig.worker.kill_child():
            kind = KINDS[1]  # still booting: no child to kill yet, so kill it whole
        if kind == KINDS[1]:
            rig.worker.kill_main()
            rig.worker.start()
        elif kind == KINDS[2]:
            rig.worker.terminate()
            rig.worker.start()
        result.faults[(phase, kind)] += 1


def exercise(rig: Rig, people: People, inbox: Inbox, *, quick: bool) -> Result:
    """Run the rounds; see the module docstring."""
    from clusters.kinds.rayjob import requests as jobs_services
    from clusters.kinds.rayjob.spec import JobSpec
    from clusters.models import ClusterRequest
    from clusters.requests import services
    from clusters.rows.spec import ClusterSpec

    plan = QUICK if quick else FULL
    rng = random.Random(SEED)
    result = Result()
    started = time.monotonic()
    rig.sim.set_faults(rate=1.0, codes=(), delay_ms=40)
    rig.sim.set_rayjob_defaults(run_seconds=2, pending_seconds=0)
    admin, tenant, h100 = people.admin, people.tenant, people.h100
    expected: dict[int, str] = {}

    def rows(pks: list[int]) -> list[Any]:
        return list(ClusterRequest.objects.unscoped().filter(pk__in=pks))

    def phase(name: str, pks: list[int], done: Any, state: str, *, podless: bool = False) -> None:
        # ``podless``: converged only once the requests' pods are gone too. A suspended
        # row gives its GPUs back when it moves; KubeRay removes its pods when it acts on
        # ``spec.suspend``, a moment later, and until then they are not orphans.
        inject(rig, rng, plan["faults_per_phase"], name, result)
        took = converge(
            lambda: all(done(r) for r in rows(pks)) and not (podless and pods_of(pks)),
            timeout=CONVERGE_TIMEOUT,
        )
        if took is None:
            stuck = [r for r in rows(pks) if not done(r)]
            result.unconverged.append(
                f"{name} ({len(pks)} requests; not converged: {diagnose(rig, stuck)})"
            )
        else:
            result.convergence.append(took)
        expected.update(dict.fromkeys(pks, state))
        result.audit.add(audit(expected))

    for rnd in range(plan["rounds"]):
        clusters = [
            services.cluster_request_create(
                actor=admin,
                tenant=tenant,
                spec=ClusterSpec(name=f"r{rnd}-c{i}", flavor=h100, workers=1),
            ).pk
            for i in range(plan["clusters"])
        ]
        result.requests += len(clusters)
        phase("provisioning", clusters, lambda r: r.state == "ready", "ready")
        half = clusters[: len(clusters) // 2 or 1]
        for row in rows(half):
            services.cluster_suspend(actor=admin, cluster=row)
        phase("suspension", half, lambda r: r.state == "suspended", "suspended", podless=True)
        for row in rows(half):
            services.cluster_resume(actor=admin, cluster=row)
        phase("resumption", half, lambda r: r.state == "ready", "ready")
        jobs = [
            jobs_services.job_create(
                actor=admin,
                tenant=tenant,
                spec=ClusterSpec(name=f"r{rnd}-j{i}", flavor=h100, workers=1),
                job=JobSpec(entrypoint="python train.py", name=f"r{rnd}-j{i}"),
            ).pk
            for i in range(plan["jobs"])
        ]
        result.requests += len(jobs)
        phase(
            "job runs",
            jobs,
            lambda r: r.state == "succeeded" and not r.holds_gpus,
            "succeeded",
        )
        for row in rows(clusters + jobs):
            services.cluster_delete(actor=admin, cluster=row)
        phase("deletion", clusters + jobs, lambda r: r.state == "deleted", "deleted")
    rig.sim.clear_faults()

    # Every mail the engine owes: none lost, none twice.
    from notifications.models import Delivery, DeliveryStatus

    def mail_settled() -> bool:
        pending = Delivery.objects.exclude(status=DeliveryStatus.SENT).exists()
        return not pending and len(set(inbox.ids)) >= Delivery.objects.count()

    converge(mail_settled, timeout=CONVERGE_TIMEOUT)
    result.deliveries, result.mail_lost, result.mail_twice = notification_figures(inbox)
    result.wall = time.monotonic() - started
    return result


def section(result: Result, *, quick: bool) -> str:
    """The markdown section of ``docs/reliability.md``."""
    from reliability.rig import loadavg

    plan = QUICK if quick else FULL
    by_phase = Counter(p for p, _ in result.faults.elements())
    by_kind = Counter(k for _, k in result.faults.elements())
    a = result.audit
    lines = [
        "## Worker faults",
        "",
        f"`python -m reliability workers`: {plan['rounds']} rounds of {plan['clusters']} dev "
        f"clusters and {plan['jobs']} RayJobs ({result.requests} requests), each round "
        "provisioning, suspending half, resuming them, running the jobs and deleting "
        "everything, against PostgreSQL, Redis, a Celery worker (prefork, 2 children) and "
        "beat in their own processes and kubesim over HTTP (every call 40 ms slower). "
        f"**{result.total_faults} faults** at seeded random moments while each phase was in "
        "flight; after each phase the stack converged on its own before the next one, and "
        "was audited. A suspension phase has converged once the suspended requests' pods "
        "are gone too: a suspended request gives its GPUs back to the quota ledger when "
        "its row moves, and KubeRay (here kubesim's) deletes its pods when it acts on "
        "`spec.suspend`, a moment later. (The first full run audited before that moment and "
        "counted 16 such pods as orphans; none was left behind.)",
        "",
        "| Fault | " + " | ".join(PHASES) + " | all |",
        "|---|" + "---:|" * (len(PHASES) + 1),
    ]
    for kind in KINDS:
        cells = [str(result.faults[(p, kind)]) for p in PHASES]
        lines.append(f"| {kind} | " + " | ".join(cells) + f" | {by_kind[kind]} |")
    lines.append(
        "| all | " + " | ".join(str(by_phase[p]) for p in PHASES) + f" | {result.total_faults} |"
    )
    from reliability.rig import seconds as fmt

    lines += [
        "",
        "| Figure | Result |",
        "|---|---:|",
        f"| requests lost (not in the state asked for) | {a.lost} |",
        f"| duplicate RayClusters / RayJobs | {a.duplicates} |",
        f"| orphaned objects | {a.orphans} |",
        f"| quota-ledger drift (GPUs) | {a.drift} |",
        f"| usage spans left open | {a.open_spans} |",
        f"| notifications mailed (real SMTP on loopback) | {result.deliveries} |",
        f"| notifications lost | {result.mail_lost} |",
        f"| notifications sent twice | {result.mail_twice} |",
        f"| phases that did not converge within {CONVERGE_TIMEOUT:.0f} s | "
        f"{len(result.unconverged)} |",
        f"| time to converge after the last fault of a phase | {fmt(result.convergence)} |",
        "",
        f"The run took {result.wall / 60:.1f} minutes; load average at the end {loadavg()} "
        "(the machine is shared; times are upper bounds).",
    ]
    if a.details or result.unconverged:
        lines += ["", "What was found: " + "; ".join(result.unconverged + a.details[:20]) + "."]
    return "\n".join(lines)


def run(quick: bool) -> str:
    """``make reliability``'s entry point (its own database, kubesim, worker and beat)."""
    from reliability.rig import seed, standalone

    inbox = Inbox()
    inbox.controller.start()
    try:
        with standalone("rel_workers", **inbox.env()) as rig:
            people = seed()
            result = exercise(rig, people, inbox, quick=quick)
    finally:
        inbox.controller.stop()
    return section(result, quick=quick)
