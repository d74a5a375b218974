"""Kubernetes API faults: every fault kind kubesim injects, on every verb the engine sends,
in every phase of a request's life, under the real engine.

The engine (a Celery worker and beat in their own processes, PostgreSQL, Redis) works against
kubesim over HTTP while kubesim answers a share of its requests with a fault (:data:`KINDS`),
each verb's faults taking the kinds in turn so that every kind lands on every verb. Each phase
(:data:`PHASES`) runs with the faults on until it has converged; then, without faults, kubesim
restarts without its state, and every apply is answered 422 (nothing permanent is retried).
docs/reliability.md gives the figures, from kubesim's own record of the engine's requests.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clusters.kube.gateway import gateway_agent
from kubesim.faults import DROPPED, RESET, SLOW, Seen
from reliability.rig import Audit, People, Rig, another_tenant, audit, converge, diagnose

# The transient kinds, in the order kubesim rotates them on each verb.
KINDS = (409, 429, 500, 503, 504, 410, DROPPED, RESET, SLOW)
KIND_NAMES = {
    "409": "409 Conflict",
    "429": "429 Retry-After",
    "500": "500",
    "503": "503",
    "504": "504 Timeout",
    "410": "410 Expired (watch)",
    "0": "dropped",
    "reset": "reset mid-answer",
    "delay": "slower than the client waits",
    "422": "422 (permanent)",
}
ORDER = ["409", "429", "500", "503", "504", "410", "0", "reset", "delay", "422"]
# Provisioning in several tenants; reconcile: steady state (informers, the idle detector's
# reads through the service proxy) and RayClusters deleted behind the engine's back, made
# again once; suspension and resumption of half; RayJobs run to completion, their driver's
# log kept and GPUs released; deletion of everything.
PHASES = ("provisioning", "reconcile", "suspension", "resumption", "jobs", "deletion")
VERB_ORDER = ("list", "watch", "get", "create", "apply", "patch", "delete", "log", "proxy")
RATE = 0.25
# Verbs the engine sends rarely get rates of their own: a tenant's namespace is created
# once, a finished job's log read once (unless that read failed), a watch reopened only
# after it ended; without these they would not meet every kind. The idle detector's
# dashboard reads through the service proxy, every few seconds per ready cluster, would
# otherwise be most of the faults.
VERB_RATES = {"create": 0.7, "log": 0.6, "watch": 0.5, "proxy": 0.1}
FAULT_DELAY_MS = 10  # an injected error is answered this long after the request came
SLOW_MS = 2500  # a slow answer's delay: longer than the worker waits (WORKER_ENV)
RETRY_AFTER = 1
SEED = 20261128
# The full run's clusters and jobs fill kubesim's 32 GPUs (one each), so that no job
# waits for capacity.
FULL = {
    "tenants": 12,
    "clusters": 24,
    "drift": 8,
    "steady": 40.0,
    "jobs": 8,
    "restart": 6,
    "permanent": 6,
}
QUICK = {
    "tenants": 2,
    "clusters": 4,
    "drift": 1,
    "steady": 2.0,
    "jobs": 2,
    "restart": 1,
    "permanent": 1,
}
CONVERGE_TIMEOUT = 300.0
# Long enough for a row passing through a state on its way to have moved on (several
# of the reconciler's periods).
SETTLE_SECONDS = 3.0
# How soon after a 429 another process can know of it: the refused process classifies the
# answer and writes the deadline to the shared cache (clusters/kube/notbefore.py).
SHARING_MARGIN = 0.1
# How soon after a 429 the refused process itself knows of it: another of its threads (an
# informer's, a pass's listing thread, a task thread of the worker's pool) may have sent
# its request while the answer was still on its way to the refused one (CI saw an
# informer's LIST 0.01 s after a 429 to the same process). The process records the
# deadline as it reads the answer, before the refused request's caller sees the error.
THREAD_MARGIN = 0.05
# The worker waits 2 s for an answer; the idle detector reads every ready cluster's
# dashboard (through the service proxy) every 3 s, so that proxy reads happen in every
# phase that has ready clusters.
WORKER_ENV = {"KUBE_REQUEST_TIMEOUT_SECONDS": "2", "ACTIVITY_CHECK_SECONDS": "3"}


@dataclass
class Result:
    """The figures of one run."""

    requests: int = 0
    engine_requests: Counter[tuple[str, str]] = field(default_factory=Counter)  # phase, verb
    matrix: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # phase, verb, kind
    asked: int = 0
    converged: int = 0
    convergence: dict[str, float | None] = field(default_factory=dict)
    audit: Audit = field(default_factory=Audit)
    releases_not_once: list[str] = field(default_factory=list)
    permanent_requests: int = 0
    permanent_retries: int = 0
    throttled_retries: int = 0
    throttled_too_soon: list[str] = field(default_factory=list)
    reads_too_soon: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    watch_breaks: int = 0  # open watch streams cut at the start of a phase
    log_tails: tuple[int, int] = (0, 0)  # jobs whose driver log the row kept, jobs
    wall: float = 0.0

    @property
    def faults(self) -> Counter[str]:
        """Injected faults per kind (every phase, every verb)."""
        found: Counter[str] = Counter()
        for (_, _, kind), n in self.matrix.items():
            found[kind] += n
        return found

    def cells(self, axis: int) -> Counter[tuple[str, str]]:
        """Faults per (kind, verb) (``axis`` 1) or per (kind, phase) (``axis`` 0)."""
        found: Counter[tuple[str, str]] = Counter()
        for key, n in self.matrix.items():
            found[(key[2], key[axis])] += n
        return found


def _kind(code: int | None) -> str:
    from kubesim.faults import kind_name

    return kind_name(code)


def _retry_after(history: list[Seen], result: Result) -> None:
    """For every 429, the next request for the same method and path must come at least
    ``Retry-After`` after the refusal was answered. A write (PATCH, DELETE: an object's
    own path) that comes sooner is a retry that did not wait, and so is a read (the
    reconciler's next pass asking a refused LIST again); they are counted apart.

    A request that could not have known of the refusal is not a retry, and the next one is
    judged instead: one that came before the refusal was answered, one from the same process
    within ``THREAD_MARGIN`` of the answer (another thread's, sent while the answer was on
    its way), or one from another process (its ``User-Agent`` names the process) within
    ``SHARING_MARGIN`` of the answer, before the refused process could have shared the
    deadline. Two processes writing the same object at once is a race, not a retry (CI once
    saw a DELETE come 0.01 s after a 429 was asked, which is when the 429 was only being
    answered)."""
    refusals: dict[tuple[str, str], Seen] = {}
    # This process's own reads (the audit, the suite's checks) are the harness's, not the
    # engine's: they neither share the engine's cache nor are judged.
    harness = gateway_agent()
    for seen in history:
        if seen.method == "POST" or seen.client == harness:
            # A create goes to the collection's path: the next POST is another object.
            continue
        key = (seen.method, seen.path.split("?")[0])
        refusal = refusals.get(key)
        if refusal is not None and refusal.answered is not None:
            margin = THREAD_MARGIN if seen.client == refusal.client else SHARING_MARGIN
            knew = refusal.answered + margin
            if seen.at >= knew:
                del refusals[key]
                gap = seen.at - refusal.answered
                soon = (
                    f"{seen.method} {key[1]} by {seen.client or 'no agent'} {gap:.2f} s after "
                    f"the 429 to {refusal.client or 'no agent'}"
                )
                if seen.method == "GET":
                    if gap < RETRY_AFTER - 0.05:
                        result.reads_too_soon.append(soon)
                else:
                    result.throttled_retries += 1
                    if gap < RETRY_AFTER - 0.05:
                        result.throttled_too_soon.append(soon)
        if seen.code == 429:
            refusals[key] = seen


def tally(history: list[Seen], marks: list[tuple[float, str]], result: Result) -> None:
    """Count the engine's requests and faults by phase and verb from kubesim's history;
    ``marks`` are (start, phase) in time order, a phase ending where the next begins
    (``""``: between phases, not counted)."""
    harness = gateway_agent()
    for seen in history:
        if seen.client == harness:
            continue
        phase = ""
        for start, name in marks:
            if seen.at >= start:
                phase = name
        if not phase:
            continue
        result.engine_requests[(phase, seen.verb)] += 1
        if seen.code is not None:
            result.matrix[(phase, seen.verb, _kind(seen.code))] += 1


def _tenants(people: People, count: int) -> list[Any]:
    """The suite's tenant and ``count - 1`` more, each with a namespace of its own, so that
    the engine creates that many namespaces (its only create)."""
    return [people.tenant] + [another_tenant(people, f"rel{i}") for i in range(1, count)]


def exercise(rig: Rig, people: People, *, quick: bool) -> Result:  # noqa: C901
    """Run the phases (:data:`PHASES`), then the restart and the permanent errors."""
    from clusters.kinds.rayjob import requests as jobs_services
    from clusters.kinds.rayjob.spec import JobSpec
    from clusters.kube.gateway import get_gateway
    from clusters.models import ClusterEvent, ClusterRequest, Job, UsageSpan
    from clusters.requests import services
    from clusters.rows.spec import ClusterSpec
    from reliability.rig import pods_of

    plan = QUICK if quick else FULL
    sim = rig.sim
    gw = get_gateway()
    result = Result()
    started = time.monotonic()
    expected: dict[int, str] = {}
    admissions: Counter[int] = Counter()  # how many times each request took its GPUs
    marks: list[tuple[float, str]] = []
    tenants = _tenants(people, int(plan["tenants"]))
    sim.set_rayjob_defaults(run_seconds=2, pending_seconds=0)

    def faults_on() -> None:
        # floor: each verb's first request in a phase is faulted whatever the rate; the
        # suite's own requests (this process's) are spared.
        sim.set_faults(
            rate=RATE,
            codes=KINDS,
            delay_ms=FAULT_DELAY_MS,
            slow_ms=SLOW_MS,
            retry_after=RETRY_AFTER,
            max_page=20,
            verb_rates=VERB_RATES,
            rotate=True,
            floor=1,
            spare=(gateway_agent(),),
            seed=SEED + len(marks),
        )

    def rows(pks: list[int]) -> list[Any]:
        return list(ClusterRequest.objects.unscoped().filter(pk__in=pks))

    def phase(name: str, pks: list[int], done: Callable[[Any], bool], state: str) -> None:
        """Wait for the phase's requests to reach ``state`` (``done``), with the faults on."""
        took = converge(lambda: all(done(r) for r in rows(pks)), timeout=CONVERGE_TIMEOUT)
        result.convergence[name] = took
        if took is None:
            stuck = [r for r in rows(pks) if not done(r)]
            result.stuck.append(f"{name}: {diagnose(rig, stuck)}")
        expected.update(dict.fromkeys(pks, state))

    def create(prefix: str, count: int, spread: list[Any]) -> list[int]:
        """``count`` dev clusters ``<prefix><i>``, spread over the tenants ``spread``."""
        pks = [
            services.cluster_request_create(
                actor=people.admin,
                tenant=spread[i % len(spread)],
                spec=ClusterSpec(name=f"{prefix}{i}", flavor=people.h100, workers=1),
            ).pk
            for i in range(count)
        ]
        result.asked += count
        return pks

    def begin(name: str) -> None:
        """Start a phase: faults on afresh, and every open watch cut (as a load balancer
        in front of the API server dropping its connections), so that the informers list
        and watch again within the phase, under its faults."""
        marks.append((time.monotonic(), name))
        if name:
            faults_on()
            result.watch_breaks += sim.break_watches()

    sim.faults.reset_stats()
    # 1. provisioning, spread over the tenants
    begin("provisioning")
    clusters = create("c", int(plan["clusters"]), tenants)
    admissions.update(clusters)
    phase("provisioning", clusters, lambda r: r.state == "ready", "ready")
    # 2. reconcile: steady state, then RayClusters deleted behind the engine's back
    begin("reconcile")
    time.sleep(float(plan["steady"]))
    gone = rows(clusters[: int(plan["drift"])])
    for row in gone:
        gw.delete("ray.io/v1", "RayCluster", row.name, row.namespace)

    def remade() -> bool:
        names = {
            (rc["metadata"]["namespace"], rc["metadata"]["name"])
            for rc in gw.list("ray.io/v1", "RayCluster", label_selector="gangway.dev/cluster-id")
        }
        return all((r.namespace, r.name) in names for r in gone)

    result.convergence["reconcile: made again"] = converge(remade, timeout=CONVERGE_TIMEOUT)
    phase("reconcile", clusters, lambda r: r.state == "ready", "ready")
    # 3. suspension and resumption of half
    half = clusters[: len(clusters) // 2]
    begin("suspension")
    for row in rows(half):
        services.cluster_suspend(actor=people.admin, cluster=row)
    # Converged once the pods are gone too: KubeRay deletes them when it acts on
    # spec.suspend, a moment after the row gave its GPUs back.
    phase("suspension", half, lambda r: r.state == "suspended", "suspended")
    result.convergence["suspension: pods gone"] = converge(
        lambda: not pods_of(half), timeout=CONVERGE_TIMEOUT
    )
    begin("resumption")
    for row in rows(half):
        services.cluster_resume(actor=people.admin, cluster=row)
    admissions.update(half)
    phase("resumption", half, lambda r: r.state == "ready", "ready")
    # 4. jobs to completion and their GPUs back
    begin("jobs")
    jobs = [
        jobs_services.job_create(
            actor=people.admin,
            tenant=tenants[i % len(tenants)],
            spec=ClusterSpec(name=f"j{i}", flavor=people.h100, workers=1),
            job=JobSpec(entrypoint="python train.py", name=f"j{i}"),
        ).pk
        for i in range(int(plan["jobs"]))
    ]
    result.asked += len(jobs)
    admissions.update(jobs)
    phase("jobs", jobs, lambda r: r.state == "succeeded" and not r.holds_gpus, "succeeded")
    # 5. deletion of everything
    begin("deletion")
    for row in rows(clusters + jobs):
        services.cluster_delete(actor=people.admin, cluster=row)
    phase("deletion", clusters + jobs, lambda r: r.state == "deleted", "deleted")
    begin("")
    sim.clear_faults()
    # A write the worker stopped waiting for (2 s) is still applied when its answer comes
    # (2.5 s), as a timed-out write may be in Kubernetes: an apply sent just before a
    # deletion can recreate the RayCluster of a request deleted meanwhile. The reconciler
    # deletes what no live request wants; the audit waits for the late writes and for
    # that, and an orphan that stays still fails it.
    time.sleep(SLOW_MS / 1000)
    result.convergence["deletion: no orphans"] = converge(
        lambda: not audit(expected).orphans, timeout=CONVERGE_TIMEOUT
    )
    result.audit.add(audit(expected))
    # GPU holds: each admission opened one usage span, closed once; each job's GPUs were
    # released once.
    for pk in clusters + jobs:
        spans = UsageSpan.objects.filter(cluster_id=pk).count()
        if spans != admissions[pk]:
            result.releases_not_once.append(
                f"request {pk}: {spans} usage spans, {admissions[pk]} admissions"
            )
    for pk in jobs:
        released = ClusterEvent.objects.filter(cluster_id=pk, reason="gpus_released").count()
        if released != 1:
            result.releases_not_once.append(f"job {pk}: GPUs released {released} times")
    kept = (
        Job.objects.filter(request_id__in=jobs).exclude(log_tail=None).exclude(log_tail="").count()
    )
    result.log_tails = (kept, len(jobs))
    tally(list(sim.faults.history), marks, result)

    # 6. kubesim loses everything while clusters run
    restart = create("keep-", int(plan["restart"]), [people.tenant])
    phase("restart: provisioned", restart, lambda r: r.state == "ready", "ready")
    sim.restart(keep_state=False)

    def recreated() -> bool:
        names = {
            rc["metadata"]["name"]
            for rc in gw.list("ray.io/v1", "RayCluster", label_selector="gangway.dev/cluster-id")
            if (rc.get("status") or {}).get("state") == "ready"
        }
        ready = ClusterRequest.objects.unscoped().filter(pk__in=restart, state="ready").count()
        return names >= {f"keep-{i}" for i in range(int(plan["restart"]))} and ready == len(restart)

    result.convergence["restart: recreated"] = converge(recreated, timeout=CONVERGE_TIMEOUT)
    # A row can read ready while the reconciler is still recreating its RayCluster (it
    # moves to provisioning once the informer sees the new, not yet ready object, then
    # to ready again): wait for every row to settle where it should be and stay there
    # for several reconciler periods; one that never does still fails the audit.
    result.convergence["restart: settled"] = converge(
        lambda: not audit(expected).lost, timeout=CONVERGE_TIMEOUT, hold=SETTLE_SECONDS
    )
    result.audit.add(audit(expected))
    for row in rows(restart):
        services.cluster_delete(actor=people.admin, cluster=row)
    phase("restart: deleted", restart, lambda r: r.state == "deleted", "deleted")
    # 7. permanent errors: never retried
    sim.set_faults(rate=1.0, codes=(422,), methods=["PATCH"])
    mark = time.monotonic()
    refused = create("refused-", int(plan["permanent"]), [people.tenant])
    phase("permanent: failed", refused, lambda r: r.state == "failed", "failed")
    time.sleep(3)  # several reconciler and sweeper periods: a retry would show
    sim.clear_faults()  # before the audit's reads
    paths: Counter[str] = Counter(
        seen.path for seen in sim.faults.history if seen.code == 422 and seen.at >= mark
    )
    result.permanent_requests = len(refused)
    result.permanent_retries = sum(n - 1 for n in paths.values())
    result.matrix[("permanent", "apply", "422")] += sum(paths.values())
    result.audit.add(audit(expected))

    stats = sim.faults.stats()
    result.requests = int(stats["requests"].get("total", 0))
    _retry_after(list(sim.faults.history), result)
    result.converged = result.asked - result.audit.lost
    result.wall = time.monotonic() - started
    return result


# What the suite found in the engine, each fixed with a test; and what it still loses.
FOUND = (
    "What this suite found, each fixed with a test: a connection that broke while an "
    "answer's body was read (a reset mid-answer) escaped every caller's `except "
    "KubeError` as urllib3's `ProtocolError` (clusters/kube/gateway.py, "
    "clusters/kube/raydash.py; `tests/clusters/kube/test_gateway.py::"
    "test_an_answer_cut_mid_body_is_transient_on_every_verb`, "
    "`tests/clusters/live/test_idle_e2e.py::"
    "test_a_dashboard_answer_cut_mid_body_is_unreachable_not_an_error`); the sweeper "
    "re-sent a stale row's message at every sweep while the last one still waited in the "
    "queue, so that with 35 deleting rows the queue grew past 6,000 messages, the "
    "provision pass that would have finished the deletions waited behind them and they "
    "did not converge within 300 s (clusters/tasks.py; "
    "`tests/clusters/engine/test_provision_pass.py::"
    "test_a_stale_row_is_sent_again_once_per_stale_interval_not_at_every_sweep`); a pod's "
    "log was read without the retries every other read has, and one transient answer lost "
    "a finished job's driver output, 3 of 8 in the first full run "
    "(`tests/clusters/kube/test_gateway.py::"
    "test_a_pod_log_read_is_asked_again_after_a_transient_answer`); a job whose log reads "
    "all failed (a 429, or several faults in a row) lost its output, 2 of 8: a read that "
    "fails is now the pass's error, read again by later passes while the pods are there, "
    "and a stopped or deleted job's RayJob waits for it (`tests/clusters/engine/"
    "test_jobs.py::test_a_driver_log_that_cannot_be_read_is_read_again_before_its_pods_go`); "
    "the idle detector read a dashboard again 0.4-0.7 s after a 429 asking for 1 s "
    "(clusters/kube/raydash.py; `tests/clusters/live/test_idle_e2e.py::"
    "test_a_dashboard_read_refused_with_429_waits_its_retry_after`)."
)


def _table(result: Result, columns: list[str], axis: int, head: str) -> list[str]:
    """A kind x ``columns`` table of fault counts (``axis``: 0 phases, 1 verbs)."""
    cells = result.cells(axis)
    kinds = [k for k in ORDER if result.faults[k]]
    lines = [
        f"| fault \\ {head} | " + " | ".join(columns) + " | all |",
        "|---|" + "---:|" * (len(columns) + 1),
    ]
    for kind in kinds:
        row = [str(cells[(kind, c)]) for c in columns]
        lines.append(f"| {KIND_NAMES[kind]} | " + " | ".join(row) + f" | {result.faults[kind]} |")
    totals = [str(sum(cells[(k, c)] for k in kinds)) for c in columns]
    lines.append("| all | " + " | ".join(totals) + f" | {sum(result.faults.values())} |")
    return lines


def section(result: Result, *, quick: bool) -> str:
    """The markdown section of ``docs/reliability.md``."""
    from reliability.rig import loadavg

    plan = QUICK if quick else FULL
    a = result.audit
    verbs = [v for v in VERB_ORDER if any(k[1] == v for k in result.engine_requests)]
    timings = ", ".join(
        f"{name} {'did not converge' if took is None else f'{took:.1f} s'}"
        for name, took in result.convergence.items()
    )
    honoured = result.throttled_retries - len(result.throttled_too_soon)
    faults = sum(result.faults.values())
    lines = [
        "## Kubernetes API faults",
        "",
        "`python -m reliability kubeapi`: the engine (a Celery worker and beat in their own "
        "processes, PostgreSQL, Redis) against kubesim over HTTP with fault injection, "
        f"through every phase of a request's life: {plan['clusters']} dev clusters "
        f"provisioned in {plan['tenants']} tenants (each tenant's namespace created: the "
        f"engine's only create); reconcile: {plan['steady']:.0f} s of steady state, then "
        f"{plan['drift']} RayClusters deleted behind the engine's back; half the clusters "
        f"suspended and resumed; {plan['jobs']} RayJobs run to completion (driver log "
        "read, GPUs released); everything deleted. While each phase ran, "
        f"{RATE:.0%} of the engine's requests (create {VERB_RATES['create']:.0%}, log "
        f"{VERB_RATES['log']:.0%}, watch {VERB_RATES['watch']:.0%}, the idle detector's "
        f"reads through the service proxy {VERB_RATES['proxy']:.0%}) were answered with "
        "a fault, each verb's faults taking the kinds in turn: 409, 429 (Retry-After "
        f"{RETRY_AFTER} s), 500, 503, 504, 410 Expired (watches only, as the API server "
        "sends it), the connection dropped without an answer, reset halfway through the "
        "answer (a watch cut mid-stream; the request itself carried out), or answered "
        f"after {SLOW_MS / 1000:.1f} s, longer than the worker's 2 s timeout (still "
        "applied when its answer comes); every list paged at 20 items. Then, without "
        f"faults, kubesim restarted without its state under {plan['restart']} running "
        f"clusters, and {plan['permanent']} requests whose every apply was answered 422. "
        "Each phase began with faults set afresh, each verb's first request in it faulted "
        "whatever the rate, and every open watch cut without its end (as a load balancer in "
        f"front of the API server drops its connections: {result.watch_breaks} streams "
        "in all), so that the informers listed and watched again under the phase's "
        "faults. The counts are kubesim's own record of the engine's requests (the "
        "suite's own reads were never faulted).",
        "",
        f"**{faults} faults** injected in {sum(result.engine_requests.values())} engine "
        "requests. By kind and verb:",
        "",
        *_table(result, verbs, 1, "verb"),
        "",
        "By kind and phase:",
        "",
        *_table(result, [*PHASES, "permanent"], 0, "phase"),
        "",
        "Requests the engine sent and faults injected, by verb and phase (faulted / sent):",
        "",
        "| verb | " + " | ".join(PHASES) + " |",
        "|---|" + "---:|" * len(PHASES),
    ]
    by_cell: Counter[tuple[str, str]] = Counter()
    for (phase, verb, _), n in result.matrix.items():
        by_cell[(phase, verb)] += n
    for verb in verbs:
        cells = [
            f"{by_cell[(p, verb)]} / {result.engine_requests[(p, verb)]}"
            if result.engine_requests[(p, verb)]
            else "-"
            for p in PHASES
        ]
        lines.append(f"| {verb} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| Figure | Result |",
        "|---|---:|",
        f"| API requests served (the suite's included) | {result.requests} |",
        f"| requests converged | {result.converged} of {result.asked} |",
        f"| duplicate RayClusters / RayJobs | {a.duplicates} |",
        f"| orphaned objects | {a.orphans} |",
        f"| quota-ledger drift (GPUs) | {a.drift} |",
        f"| usage spans left open | {a.open_spans} |",
        f"| GPU holds not released exactly once | {len(result.releases_not_once)} |",
        f"| finished jobs whose driver log the row kept | {result.log_tails[0]} of "
        f"{result.log_tails[1]} |",
        f"| retries of permanent errors (422) | {result.permanent_retries} "
        f"(over {result.permanent_requests} refused requests) |",
        f"| retried writes after a 429 that waited Retry-After | {honoured} of "
        f"{result.throttled_retries} |",
        f"| reads asked again sooner than a 429's Retry-After | {len(result.reads_too_soon)} |",
        "",
        f"Time to converge: {timings}. The run took {result.wall / 60:.1f} minutes; load "
        f"average at the end {loadavg()}.",
    ]
    lines += ["", FOUND]
    found = result.stuck + a.details[:20] + result.releases_not_once[:10]
    if found:
        lines += ["", "What was found: " + "; ".join(found) + "."]
    if result.throttled_too_soon:
        lines += ["", "Retries that did not wait: " + "; ".join(result.throttled_too_soon[:10])]
    if result.reads_too_soon:
        lines += ["", "Reads that did not wait: " + "; ".join(result.reads_too_soon[:10])]
    return "\n".join(lines)


def run(quick: bool) -> str:
    """``make reliability``'s entry point (its own database, kubesim, worker and beat)."""
    from reliability.rig import seed, standalone

    with standalone("rel_kubeapi", **WORKER_ENV) as rig:
        result = exercise(rig, seed(), quick=quick)
    return section(result, quick=quick)
