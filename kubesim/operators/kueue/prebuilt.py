"""Kueue's prebuilt Workloads on a worker cluster: a job labelled
``kueue.x-k8s.io/prebuilt-workload-name`` (as MultiKueue creates it) has no Workload made
for it; it adopts the named one (an owner reference and the job-UID label) and runs when
that Workload is admitted. Until the Workload exists the job stays suspended; it is
synced again on every change of that Workload (Kueue retries such a job until the Workload
exists), so a copy that arrived first, or whose Workload MultiKueue made anew, starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesim.operators.kueue.common import (
    JOB_UID_LABEL,
    WL,
    is_admitted,
    is_finished,
    is_suspended,
    set_suspended,
    touch_job,
)
from kubesim.operators.kueue.start import start_job
from kubesim.operators.kueue.workloads import finish, outcome
from kubesim.store import Obj
from kubesim.util import owner_ref

if TYPE_CHECKING:
    from kubesim.operators.kueue import Kueue

PREBUILT_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"


def prebuilt_name(job: Obj) -> str:
    """The prebuilt Workload a job names ("" when none)."""
    return str((job["metadata"].get("labels") or {}).get(PREBUILT_LABEL, ""))


def sync_prebuilt(kueue: Kueue, job: Obj, key: str) -> bool:
    """Adopt, start, stop or finish the prebuilt Workload of ``job`` (storage ``key``);
    True when anything was written."""
    cluster = kueue.cluster
    meta = job["metadata"]
    wl = cluster.store.get(WL, meta["namespace"], prebuilt_name(job))
    if wl is None:
        if not is_suspended(key, job):
            set_suspended(key, job, True)
            touch_job(cluster, key, job)
            return True
        return False
    busy = False
    owners = wl["metadata"].get("ownerReferences") or []
    if not any(o.get("uid") == meta["uid"] for o in owners):
        wl["metadata"]["ownerReferences"] = [*owners, owner_ref(job)]
        wl["metadata"].setdefault("labels", {})[JOB_UID_LABEL] = meta["uid"]
        cluster.update_object(cluster.rt(WL), wl)
        busy = True
    done = outcome(key, job)
    if done is not None:
        return finish(kueue, wl, job, *done) or busy
    if is_finished(wl):
        return busy
    if is_admitted(wl) and is_suspended(key, job):
        start_job(cluster, wl, wl["status"]["admission"]["clusterQueue"])
        return True
    if not is_admitted(wl) and not is_suspended(key, job):
        set_suspended(key, job, True)
        touch_job(cluster, key, job)
        return True
    return busy
