"""Kubernetes API faults: kubesim's fault injection under the real engine.

Phases, each through the Celery worker and beat against kubesim over HTTP:

1. **errors**: a share of all API requests answered 409, 429 (with ``Retry-After``),
   500, 503, 504, or dropped without an answer, while lists page (at most 20 items a page,
   so every LIST follows ``continue``); clusters are provisioned, then deleted.
2. **slow**: a share of requests answered only after longer than the client's timeout
   (the worker waits 2 s); clusters provisioned, then deleted.
3. **restart**: kubesim restarted without its state while clusters run: the engine
   must recreate what the rows want, once.
4. **permanent**: every PATCH answered 422: each request fails at once, and no
   permanent error is retried.

Figures: requests served and faults injected, requests converged, duplicate and orphaned
objects, ledger drift, open usage spans, retries of permanent errors, and whether every
retry after a 429 waited the ``Retry-After`` it was told.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from clusters.kube.gateway import gateway_agent
from kubesim.faults import Seen
from reliability.rig import Audit, People, Rig, audit, converge

CODES = (409, 429, 500, 503, 504, 0)  # 0: the connection dropped, no answer
FAULT_DELAY_MS = 10  # an injected error is answered this long after the request came
FULL = {"errors": 16, "slow": 8, "restart": 6, "permanent": 6}
# The quick run's errors phase is as large as the full one's: the faults land at random,
# and with the engine's batched writes 8 clusters made so few requests that a run could
# see no 429 at all (CI did).
QUICK = {"errors": 16, "slow": 8, "restart": 2, "permanent": 2}
CONVERGE_TIMEOUT = 300.0
SLOW_MS = 2500  # a slow answer's delay: longer than the worker waits (WORKER_ENV)
RETRY_AFTER = 1
# How soon after a 429 another process can know of it: the refused process classifies the
# answer and writes the deadline to the shared cache (clusters/kube/notbefore.py).
SHARING_MARGIN = 0.1
# How soon after a 429 the refused process itself knows of it: another of its threads (an
# informer's, a pass's listing thread, a task thread of the worker's pool) may have sent
# its request while the answer was still on its way to the refused one (CI saw an
# informer's LIST 0.01 s after a 429 to the same process). The process records the
# deadline as it reads the answer, before the refused request's caller sees the error.
THREAD_MARGIN = 0.05
WORKER_ENV = {"KUBE_REQUEST_TIMEOUT_SECONDS": "2"}


@dataclass
class Result:
    """The figures of one run."""

    requests: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    asked: int = 0
    converged: int = 0
    convergence: dict[str, float | None] = field(default_factory=dict)
    audit: Audit = field(default_factory=Audit)
    permanent_requests: int = 0
    permanent_retries: int = 0
    throttled_retries: int = 0
    throttled_too_soon: list[str] = field(default_factory=list)
    reads_too_soon: list[str] = field(default_factory=list)
    wall: float = 0.0


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


def exercise(rig: Rig, people: People, *, quick: bool) -> Result:
    """Run the phases; see the module docstring."""
    from clusters.models import ClusterRequest
    from clusters.requests import services
    from clusters.spec import ClusterSpec

    plan = QUICK if quick else FULL
    sim = rig.sim
    result = Result()
    started = time.monotonic()
    expected: dict[int, str] = {}

    def create(prefix: str, count: int) -> list[int]:
        pks = [
            services.cluster_request_create(
                actor=people.admin,
                tenant=people.tenant,
                spec=ClusterSpec(name=f"{prefix}-{i}", flavor=people.h100, workers=1),
            ).pk
            for i in range(count)
        ]
        result.asked += count
        return pks

    def settle(name: str, pks: list[int], state: str) -> None:
        def done() -> bool:
            rows = ClusterRequest.objects.unscoped().filter(pk__in=pks, state=state)
            return rows.count() == len(pks)

        result.convergence[name] = converge(done, timeout=CONVERGE_TIMEOUT)
        expected.update(dict.fromkeys(pks, state))

    def delete(pks: list[int]) -> None:
        for row in ClusterRequest.objects.unscoped().filter(pk__in=pks):
            services.cluster_delete(actor=people.admin, cluster=row)

    sim.faults.reset_stats()
    # 1. errors and dropped connections, with lists that page
    sim.set_faults(
        rate=0.25, codes=CODES, delay_ms=FAULT_DELAY_MS, retry_after=RETRY_AFTER, max_page=20
    )
    pks = create("err", plan["errors"])
    settle("errors: provisioned", pks, "ready")
    delete(pks)
    settle("errors: deleted", pks, "deleted")
    sim.clear_faults()  # the audit's own reads must not be faulted
    result.audit.add(audit(expected))
    # 2. slow answers, some slower than the client waits
    sim.set_faults(rate=0.15, codes=(), delay_ms=SLOW_MS)
    pks = create("slow", plan["slow"])
    settle("slow: provisioned", pks, "ready")
    delete(pks)
    settle("slow: deleted", pks, "deleted")
    sim.clear_faults()
    # A write the worker stopped waiting for (2 s) is still applied when its answer comes
    # (2.5 s), as a timed-out write may be in Kubernetes: an apply sent just before a
    # deletion can recreate the RayCluster of a request deleted meanwhile. The reconciler
    # deletes what no live request wants; the audit waits for the late writes and for
    # that, and an orphan that stays still fails it.
    time.sleep(SLOW_MS / 1000)
    result.convergence["slow: no orphans"] = converge(
        lambda: not audit(expected).orphans, timeout=CONVERGE_TIMEOUT
    )
    result.audit.add(audit(expected))
    # 3. kubesim loses everything while clusters run
    pks = create("keep", plan["restart"])
    settle("restart: provisioned", pks, "ready")
    sim.restart(keep_state=False)
    from clusters.kube.gateway import get_gateway

    gw = get_gateway()

    def recreated() -> bool:
        names = {
            rc["metadata"]["name"]
            for rc in gw.list("ray.io/v1", "RayCluster", label_selector="gangway.dev/cluster-id")
        }
        ready = ClusterRequest.objects.unscoped().filter(pk__in=pks, state="ready").count()
        return names >= {f"keep-{i}" for i in range(plan["restart"])} and ready == len(pks)

    result.convergence["restart: recreated"] = converge(recreated, timeout=CONVERGE_TIMEOUT)
    result.audit.add(audit(expected))
    delete(pks)
    settle("restart: deleted", pks, "deleted")
    # 4. permanent errors: never retried
    sim.set_faults(rate=1.0, codes=(422,), methods=["PATCH"])
    mark = time.monotonic()
    pks = create("refused", plan["permanent"])
    settle("permanent: failed", pks, "failed")
    time.sleep(3)  # several reconciler and sweeper periods: a retry would show
    sim.clear_faults()  # before the audit's reads
    refused: Counter[str] = Counter(
        seen.path for seen in sim.faults.history if seen.code == 422 and seen.at >= mark
    )
    result.permanent_requests = len(pks)
    result.permanent_retries = sum(n - 1 for n in refused.values())
    result.audit.add(audit(expected))

    stats = sim.faults.stats()
    result.requests = int(stats["requests"].get("total", 0))
    result.faults = Counter({k: int(v) for k, v in stats["faults"].items() if k != "total"})
    _retry_after(list(sim.faults.history), result)
    result.converged = result.asked - result.audit.lost
    result.wall = time.monotonic() - started
    return result


def section(result: Result, *, quick: bool) -> str:
    """The markdown section of ``docs/reliability.md``."""
    from reliability.rig import loadavg

    plan = QUICK if quick else FULL
    names = defaultdict(lambda: "", {"0": "dropped connection", "delay": "slow answer"})
    faults = ", ".join(
        f"{names[code] or code}: {count}" for code, count in sorted(result.faults.items())
    )
    a = result.audit
    timings = ", ".join(
        f"{name} {'did not converge' if took is None else f'{took:.1f} s'}"
        for name, took in result.convergence.items()
    )
    honoured = result.throttled_retries - len(result.throttled_too_soon)
    return "\n".join(
        [
            "## Kubernetes API faults",
            "",
            "`python -m reliability kubeapi`: the engine (a Celery worker and beat in their "
            "own processes, PostgreSQL, Redis) against kubesim over HTTP with fault "
            f"injection. Errors: {plan['errors']} clusters provisioned and deleted while 25% "
            "of API requests were answered 409, 429 (Retry-After 1 s), 500, 503, 504 or "
            "dropped without an answer, and every list paged at 20 items; slow: "
            f"{plan['slow']} clusters while 15% of requests took 2.5 s, longer than the "
            "worker's 2 s timeout (such a write is still applied when its answer comes; "
            "the audit waits for that and for the reconciler to delete an object it "
            "left without a live request: 'slow: no orphans'); restart: kubesim "
            "restarted without its state under "
            f"{plan['restart']} running clusters; permanent: {plan['permanent']} requests "
            "whose every PATCH was answered 422.",
            "",
            "| Figure | Result |",
            "|---|---:|",
            f"| API requests served | {result.requests} |",
            f"| faults injected | {sum(result.faults.values())} ({faults}) |",
            f"| requests converged | {result.converged} of {result.asked} |",
            f"| duplicate RayClusters / RayJobs | {a.duplicates} |",
            f"| orphaned objects | {a.orphans} |",
            f"| quota-ledger drift (GPUs) | {a.drift} |",
            f"| usage spans left open | {a.open_spans} |",
            f"| retries of permanent errors (422) | {result.permanent_retries} "
            f"(over {result.permanent_requests} refused requests) |",
            f"| retried writes after a 429 that waited Retry-After | {honoured} of "
            f"{result.throttled_retries} |",
            f"| reads asked again sooner than a 429's Retry-After | {len(result.reads_too_soon)} |",
            "",
            f"Time to converge: {timings}. The run took {result.wall / 60:.1f} minutes; load "
            f"average at the end {loadavg()}.",
        ]
        + (["", "What was found: " + "; ".join(a.details[:20]) + "."] if a.details else [])
        + (
            ["", "Retries that did not wait: " + "; ".join(result.throttled_too_soon[:10])]
            if result.throttled_too_soon
            else []
        )
        + (
            ["", "Reads that did not wait: " + "; ".join(result.reads_too_soon[:10])]
            if result.reads_too_soon
            else []
        )
    )


def run(quick: bool) -> str:
    """``make reliability``'s entry point (its own database, kubesim, worker and beat)."""
    from reliability.rig import seed, standalone

    with standalone("rel_kubeapi", **WORKER_ENV) as rig:
        result = exercise(rig, seed(), quick=quick)
    return section(result, quick=quick)
