"""Kueue's admission checks, and its ProvisioningRequest admission check controller
(``pkg/controller/admissionchecks/provisioning``). A Workload reserving quota in a
ClusterQueue with checks waits suspended (``UnsatisfiedChecks``) until every check is
``Ready``, then is admitted with their ``podSetUpdates``. For a
``kueue.x-k8s.io/provisioning-request`` check, a ProvisioningRequest (and its
PodTemplates) is made per attempt from the config, and its conditions map onto the
check: ``Provisioned`` -> ``Ready``, ``Failed`` or an early ``BookingExpired`` ->
``Retry`` (evict, requeue with backoff) or ``Rejected`` (evict and deactivate) past the
backoff limit. Other controllers' checks stay ``Pending``.
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import re
from typing import TYPE_CHECKING, Any

from kubesim.nodegroups import CONSUME, PR, PT, cond_true, find_cond
from kubesim.operators.kueue.common import (
    RF,
    WL,
    condition,
    is_suspended,
    owning_job,
    set_suspended,
    touch_job,
)
from kubesim.operators.kueue.start import start_job
from kubesim.store import Obj
from kubesim.util import get_path, owner_ref, parse_time

if TYPE_CHECKING:
    from kubesim.controller import ClusterView
    from kubesim.operators.kueue import Kueue

AC = "admissionchecks.kueue.x-k8s.io"
PRC = "provisioningrequestconfigs.kueue.x-k8s.io"
CONTROLLER = "kueue.x-k8s.io/provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
PARAM_ANNOTATION_PREFIX = "provreq.kueue.x-k8s.io/"
# ProvisioningRequestConfig retryStrategy defaults.
DEFAULT_RETRY = {"backoffLimitCount": 3, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}
NOT_ACTIVE = "the check is not active"
NOT_NEEDED = "the provisioning request is not needed"
UNSATISFIED = ("UnsatisfiedChecks", "The workload has not all checks ready")
# Kueue caps generated names at 253 characters: a 247-character prefix and a 5-hex hash.
_MAX_PREFIX = 252 - 5


def limit_name(full: str) -> str:
    """A generated object name as Kueue shortens it (prefix, '-', 5 hex of its SHA-1)."""
    if len(full) <= _MAX_PREFIX:
        return full
    return f"{full[:_MAX_PREFIX]}-{hashlib.sha1(full.encode()).hexdigest()[:5]}"


def request_name(wl_name: str, check: str, attempt: int) -> str:
    """``<workload>-<check>-<attempt>``, Kueue's ProvisioningRequest name."""
    return limit_name(f"{wl_name}-{check}-{attempt}")


def template_name(pr_name: str, podset: str) -> str:
    """``ppt-<request>-<podset>``, Kueue's PodTemplate name."""
    return limit_name(f"ppt-{pr_name}-{podset}")


def checks_for(cq: Obj | None, assignment: list[dict[str, Any]]) -> list[str]:
    """The AdmissionChecks a Workload admitted in ``cq`` with ``assignment`` must pass."""
    if cq is None:
        return []
    spec = cq.get("spec") or {}
    names = [str(n) for n in spec.get("admissionChecks") or []]
    flavors = {f for psa in assignment for f in (psa.get("flavors") or {}).values()}
    for rule in get_path(spec, "admissionChecksStrategy", "admissionChecks", default=[]):
        on = rule.get("onFlavors") or []
        if (not on or flavors & set(on)) and rule["name"] not in names:
            names.append(rule["name"])
    return names


def inactive_checks(cluster: ClusterView, cq: Obj) -> tuple[str, str] | None:
    """Why ClusterQueue ``cq`` cannot admit because of its admission checks (Kueue's
    ``Active`` False reason and message), or None: a check it names is missing, or not
    ``Active`` (set by the check's controller; kubesim runs only the provisioning one, so
    a check of another controller is active only when a test or tool marks it so)."""
    spec = cq.get("spec") or {}
    names = [str(n) for n in spec.get("admissionChecks") or []] + [
        r["name"] for r in get_path(spec, "admissionChecksStrategy", "admissionChecks", default=[])
    ]
    if not names:
        return None
    missing, inactive = [], []
    for name in names:
        ac = cluster.store.get(AC, "", name)
        if ac is None:
            missing.append(name)
        elif not any(
            c.get("type") == "Active" and c.get("status") == "True"
            for c in get_path(ac, "status", "conditions", default=[])
        ):
            inactive.append(name)
    reasons, messages = [], []
    if missing:
        reasons.append("AdmissionCheckNotFound")
        messages.append(f"references missing AdmissionCheck(s): {','.join(missing)}")
    if inactive:
        reasons.append("AdmissionCheckInactive")
        messages.append(f"references inactive AdmissionCheck(s): {','.join(inactive)}")
    if not reasons:
        return None
    return reasons[0], f"Can't admit new workloads: {', '.join(messages)}."


def initial_states(wl: Obj, names: list[str], stamp: str) -> list[dict[str, Any]]:
    """``status.admissionChecks`` for a new reservation: each check ``Pending`` (an existing
    entry is kept, as Kueue keeps it)."""
    old = {c["name"]: c for c in get_path(wl, "status", "admissionChecks", default=[])}
    return [
        old.get(n) or {"name": n, "state": "Pending", "message": "", "lastTransitionTime": stamp}
        for n in names
    ]


def _stamp(cluster: ClusterView) -> str:
    return datetime.datetime.fromtimestamp(cluster.clock.time(), datetime.UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )


def _config(cluster: ClusterView, ac: Obj) -> Obj | None:
    """The ProvisioningRequestConfig an AdmissionCheck's parameters name, if it exists."""
    ref = get_path(ac, "spec", "parameters") or {}
    if ref.get("kind") != "ProvisioningRequestConfig" or ref.get("apiGroup") != "kueue.x-k8s.io":
        return None
    return cluster.store.get(PRC, "", ref.get("name", ""))


def _uses(template: dict[str, Any], managed: list[str]) -> bool:
    """Whether a pod template requests (or limits) any of ``managed``; all when empty."""
    if not managed:
        return True
    spec = template.get("spec") or {}
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        res = c.get("resources") or {}
        if set(res.get("requests") or {}) & set(managed):
            return True
        if set(res.get("limits") or {}) & set(managed):
            return True
    return False


def _retry(prc: Obj) -> dict[str, int]:
    strategy = get_path(prc, "spec", "retryStrategy") or {}
    return {k: int(strategy.get(k, v)) for k, v in DEFAULT_RETRY.items()}


def _backoff(prc: Obj, attempt: int) -> float:
    """Kueue's retry backoff after failed attempt ``attempt``: base * 2^(attempt-1), capped."""
    r = _retry(prc)
    return float(min(r["backoffBaseSeconds"] * 2 ** (attempt - 1), r["backoffMaxSeconds"]))


# -- the AdmissionChecks' own status ------------------------------------------------------


def _sync_admission_checks(cluster: ClusterView) -> bool:
    """``Active`` on each provisioning AdmissionCheck, as Kueue's check reconciler writes it."""
    busy = False
    for ac in list(cluster.store.iter(AC)):
        if get_path(ac, "spec", "controllerName") != CONTROLLER:
            continue
        old = get_path(ac, "status", "conditions", default=[])
        if _config(cluster, ac) is not None:
            cond = condition("Active", True, "Active", "The admission check is active", old)
        else:
            ref = get_path(ac, "spec", "parameters", "name", default="")
            cond = condition(
                "Active",
                False,
                "BadParametersRef",
                "Cannot load the AdmissionChecks parameters: "
                f'provisioningrequestconfigs.kueue.x-k8s.io "{ref}" not found',
                old,
            )
        prev = next((c for c in old if c.get("type") == "Active"), None)
        if prev is None or (prev["status"], prev["reason"], prev["message"]) != (
            cond["status"],
            cond["reason"],
            cond["message"],
        ):
            ac["status"] = {"conditions": [cond]}
            cluster.update_object(cluster.rt(AC), ac)
            busy = True
    return busy


# -- the controller ------------------------------------------------------------------------


def sync_checks(kueue: Kueue) -> bool:
    """One pass of the provisioning admission check controller over every Workload that
    holds quota and has checks; True when anything was written."""
    cluster = kueue.cluster
    busy = _sync_admission_checks(cluster)
    for wl in list(cluster.store.iter(WL)):
        if not get_path(wl, "status", "admission"):
            continue
        if not get_path(wl, "status", "admissionChecks"):
            continue
        busy = _sync_workload(kueue, wl) or busy
    return busy


def _owned_requests(cluster: ClusterView, wl: Obj, check: str) -> dict[int, Obj]:
    """The ProvisioningRequests of ``wl`` for ``check``, by attempt."""
    prefix = re.escape(limit_name(f"{wl['metadata']['name']}-{check}-"))
    pattern = re.compile(f"^{prefix}([0-9]+)$")
    out: dict[int, Obj] = {}
    for key, ns, name in cluster.store.dependents(wl["metadata"]["uid"]):
        if key != PR:
            continue
        m = pattern.match(name)
        pr = cluster.store.get(key, ns, name)
        if m and pr is not None:
            out[int(m.group(1))] = pr
    return out


def _sync_workload(kueue: Kueue, wl: Obj) -> bool:  # noqa: C901
    """Decide each provisioning check of ``wl`` from its newest request; then admit,
    evict for a retry, or reject, as the checks say."""
    cluster = kueue.cluster
    now = cluster.clock.time()
    admitted = any(
        c.get("type") == "Admitted" and c.get("status") == "True"
        for c in get_path(wl, "status", "conditions", default=[])
    )
    busy = False
    changed = False
    for st in wl["status"]["admissionChecks"]:
        ac = cluster.store.get(AC, "", st["name"])
        if ac is None or get_path(ac, "spec", "controllerName") != CONTROLLER:
            continue
        prc = _config(cluster, ac)
        state, message, updates = st["state"], st.get("message", ""), st.get("podSetUpdates")
        if prc is None:
            state, message = "Pending", NOT_ACTIVE
        else:
            needed = [
                ps
                for ps in wl["spec"].get("podSets") or []
                if _uses(ps.get("template") or {}, get_path(prc, "spec", "managedResources") or [])
            ]
            if not needed:
                state, message, updates = "Ready", NOT_NEEDED, None
            else:
                prs = _owned_requests(cluster, wl, st["name"])
                last = max(prs) if prs else 0
                pr = prs.get(last)
                if pr is None and st["state"] == "Ready":
                    continue  # Kueue makes no new request for a Ready check
                # A Ready check is still re-read: its booking may expire before admission
                # (another check not Ready yet), which sends it to Retry.
                create = pr is None
                if pr is not None:
                    failed = cond_true(pr, "Failed")
                    expired = cond_true(pr, "BookingExpired") and not admitted
                    if failed or expired:
                        why = find_cond(pr, "Failed" if failed else "BookingExpired") or {}
                        text = why.get("message", "")
                        at = why.get("lastTransitionTime")
                        since = parse_time(at).timestamp() if at else now
                        if last > _retry(prc)["backoffLimitCount"]:
                            state, message = "Rejected", text
                        elif now >= since + _backoff(prc, last):
                            create = True  # backed off (the Workload was requeued)
                            message = (
                                f"Retrying after failure: {text}"
                                if failed
                                else f"Retrying after booking expired: {text}"
                            )
                        else:
                            state = "Retry"
                            message = (
                                f"Retrying after failure: {text}"
                                if failed
                                else f"Retrying after booking expired: {text}"
                            )
                            st["_retry_at"] = since + _backoff(prc, last)
                    elif cond_true(pr, "Provisioned"):
                        state = "Ready"
                        prov = find_cond(pr, "Provisioned") or {}
                        message = prov.get("message", message)
                        updates = [
                            {
                                "name": name,
                                "annotations": {
                                    CONSUME: pr["metadata"]["name"],
                                    CLASS_ANNOTATION: pr["spec"]["provisioningClassName"],
                                },
                            }
                            for name in _request_podsets(pr)
                        ]
                    else:
                        state = "Pending"
                        waiting = find_cond(pr, "Provisioned")
                        if cond_true(pr, "Accepted") and waiting is not None:
                            message = waiting.get("message", message)
                if create:
                    attempt = last + 1
                    _create_request(cluster, wl, st["name"], attempt, prc, needed)
                    for n, old in prs.items():
                        if n != attempt:
                            cluster.delete_object(cluster.rt(PR), old)
                    state = "Pending"
                    busy = True
        before = (st["state"], st.get("message", ""), st.get("podSetUpdates"))
        if (state, message, updates) != before:
            if state != st["state"]:
                st["lastTransitionTime"] = _stamp(cluster)
                cluster.record_event(
                    wl,
                    "Normal",
                    "AdmissionCheckUpdated",
                    f"Admission check {st['name']} updated state from {st['state']} to {state}"
                    + (f" with message {message}" if message else ""),
                    "kueue-admission",
                )
            st["state"], st["message"] = state, message
            if updates is None:
                st.pop("podSetUpdates", None)
            else:
                st["podSetUpdates"] = updates
            changed = True
    retry_at = max((st.pop("_retry_at", 0.0) for st in wl["status"]["admissionChecks"]), default=0)
    states = [st["state"] for st in wl["status"]["admissionChecks"]]
    if "Rejected" in states:
        names = [st["name"] for st in wl["status"]["admissionChecks"] if st["state"] == "Rejected"]
        _evict(
            kueue,
            wl,
            "DeactivatedDueToAdmissionCheck",
            "The workload is deactivated due to AdmissionCheck in Rejected state: "
            + ", ".join(f'"{n}"' for n in names),
            deactivate=True,
        )
        return True
    if "Retry" in states:
        _evict(
            kueue, wl, "AdmissionCheck", "At least one admission check is false", retry_at=retry_at
        )
        return True
    if states and all(s == "Ready" for s in states) and not admitted:
        _admit_checked(cluster, wl)
        return True
    if changed:
        cluster.update_object(cluster.rt(WL), wl)
        busy = True
    return busy


def _request_podsets(pr: Obj) -> list[str]:
    """The pod set names behind a request's pod templates (``ppt-<request>-<podset>``)."""
    prefix = f"ppt-{pr['metadata']['name']}-"
    return [
        ref[len(prefix) :]
        for ps in get_path(pr, "spec", "podSets", default=[])
        if (ref := get_path(ps, "podTemplateRef", "name", default="")).startswith(prefix)
    ]


def _create_request(
    cluster: ClusterView,
    wl: Obj,
    check: str,
    attempt: int,
    prc: Obj,
    podsets: list[dict[str, Any]],
) -> None:
    """The ProvisioningRequest of ``attempt`` and its PodTemplates, as Kueue makes them."""
    ns = wl["metadata"]["namespace"]
    name = request_name(wl["metadata"]["name"], check, attempt)
    counts = {
        psa["name"]: int(psa.get("count", 0))
        for psa in get_path(wl, "status", "admission", "podSetAssignments", default=[])
    }
    flavors = {
        psa["name"]: set((psa.get("flavors") or {}).values())
        for psa in get_path(wl, "status", "admission", "podSetAssignments", default=[])
    }
    params = dict(get_path(prc, "spec", "parameters") or {})
    for k, v in (wl["metadata"].get("annotations") or {}).items():
        if k.startswith(PARAM_ANNOTATION_PREFIX):
            params[k[len(PARAM_ANNOTATION_PREFIX) :]] = v
    spec: dict[str, Any] = {
        "provisioningClassName": get_path(prc, "spec", "provisioningClassName"),
        "podSets": [
            {
                "podTemplateRef": {"name": template_name(name, ps["name"])},
                "count": counts.get(ps["name"], int(ps.get("count", 1))),
            }
            for ps in podsets
        ],
    }
    if params:
        spec["parameters"] = params
    pr = cluster.create_object(
        cluster.rt(PR),
        {
            "apiVersion": "autoscaling.x-k8s.io/v1",
            "kind": "ProvisioningRequest",
            "metadata": {"name": name, "namespace": ns, "ownerReferences": [owner_ref(wl)]},
            "spec": spec,
        },
        admit=False,
    )
    cluster.record_event(
        wl,
        "Normal",
        "ProvisioningRequestCreated",
        f'Created ProvisioningRequest: "{name}"',
        "kueue-provisioning-request-controller",
    )
    for ps in podsets:
        template = copy.deepcopy(ps.get("template") or {})
        # The assigned flavors' node labels, as Kueue merges them into the template.
        for fl in sorted(flavors.get(ps["name"], set())):
            labels = get_path(cluster.store.get(RF, "", fl), "spec", "nodeLabels", default={})
            if labels:
                template.setdefault("spec", {}).setdefault("nodeSelector", {}).update(labels)
        tpl_name = template_name(name, ps["name"])
        if cluster.store.get(PT, ns, tpl_name) is not None:
            continue
        cluster.create_object(
            cluster.rt(PT),
            {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": tpl_name, "namespace": ns, "ownerReferences": [owner_ref(pr)]},
                "template": template,
            },
            admit=False,
        )


def _admit_checked(cluster: ClusterView, wl: Obj) -> None:
    """Every check is Ready: the Workload is admitted and its job started with the
    checks' podSetUpdates."""

    old = get_path(wl, "status", "conditions", default=[])
    wl["status"]["conditions"] = [
        condition("Admitted", True, "Admitted", "The workload is admitted", old)
        if c.get("type") == "Admitted"
        else c
        for c in old
    ]
    cluster.update_object(cluster.rt(WL), wl)
    updates = [u for st in wl["status"]["admissionChecks"] for u in st.get("podSetUpdates") or []]
    start_job(cluster, wl, wl["status"]["admission"]["clusterQueue"], updates)


def _evict(
    kueue: Kueue,
    wl: Obj,
    reason: str,
    message: str,
    retry_at: float = 0.0,
    deactivate: bool = False,
) -> None:
    """Evict ``wl`` for its checks, as Kueue's workload controller does: quota released,
    the checks reset to Pending, requeued after ``retry_at`` or deactivated."""
    cluster = kueue.cluster
    old = get_path(wl, "status", "conditions", default=[])
    keep = ("QuotaReserved", "Admitted", "Evicted", "Requeued")
    conditions = [
        condition("QuotaReserved", False, "Pending", message, old),
        condition("Admitted", False, "NoReservation", "The workload has no reservation", old),
        condition("Evicted", True, reason, message, old),
        condition("Requeued", False, reason, message, old),
        *[c for c in old if c.get("type") not in keep],
    ]
    stamp = _stamp(cluster)
    checks = [
        {
            "name": st["name"],
            "state": "Pending",
            "message": f"Reset to Pending after eviction. Previously: {st['state']}",
            "lastTransitionTime": stamp if st["state"] != "Pending" else st["lastTransitionTime"],
        }
        for st in wl["status"]["admissionChecks"]
    ]
    status: dict[str, Any] = {"conditions": conditions, "admissionChecks": checks}
    if not deactivate:
        count = int(get_path(wl, "status", "requeueState", "count", default=0) or 0) + 1
        at = datetime.datetime.fromtimestamp(max(retry_at, cluster.clock.time()), datetime.UTC)
        status["requeueState"] = {"count": count, "requeueAt": at.strftime("%Y-%m-%dT%H:%M:%SZ")}
    else:
        wl["spec"]["active"] = False
    wl["status"] = status
    cluster.update_object(cluster.rt(WL), wl)
    kueue.need_admit = True
    cluster.record_event(wl, "Normal", f"EvictedDueTo{reason}", message, "kueue-admission")
    found = owning_job(cluster, wl)
    if found is not None and not is_suspended(*found):
        # Kueue stops the job (a RayCluster or a RayJob) until it is admitted again.
        set_suspended(*found, True)
        touch_job(cluster, found[0], found[1])
