"""Starting a job Kueue admitted: the one place a RayCluster, RayJob or Job is unsuspended.

Shared by admission (a Workload without admission checks starts as it is admitted) and
the provisioning check controller (one with checks starts once they are all Ready, with
their ``podSetUpdates``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kubesim.operators.kueue.common import (
    PODSET_LABEL,
    RF,
    SLICE_NAME,
    is_elastic,
    owning_job,
    set_suspended,
    touch_job,
)
from kubesim.operators.kueue.topology import gate_template
from kubesim.operators.kueue.workloads import job_templates
from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView


def start_job(
    cluster: ClusterView, wl: Obj, cq_name: str, updates: list[dict[str, Any]] | None = None
) -> None:
    """Admitted ``wl``'s job (a RayCluster, RayJob or Job) runs: unsuspended with the
    flavors' node labels, the ``kueue.x-k8s.io/podset`` label and the admission checks'
    ``podSetUpdates`` (labels, annotations, nodeSelector, tolerations) in its pod
    templates; a pod set placed by topology gets the TAS gate (``topology.py``)."""
    assignment = wl["status"]["admission"]["podSetAssignments"]
    found = owning_job(cluster, wl)
    if found is None:
        return
    key, job = found
    before = json.dumps(job.get("spec"), sort_keys=True)
    flavors = {psa["name"]: set(psa["flavors"].values()) for psa in assignment}
    topology = {psa["name"] for psa in assignment if psa.get("topologyAssignment")}
    chain = (wl["metadata"].get("annotations") or {}).get(SLICE_NAME)
    for name, template in job_templates(key, job):
        if not isinstance(template, dict):
            continue
        # Kueue labels the pods with their pod set, and an elastic job's pods with the
        # name of its chain of slices (the elastic job ungater finds them by it).
        meta = template.setdefault("metadata", {})
        meta.setdefault("labels", {})[PODSET_LABEL] = name
        if chain and is_elastic(cluster, wl):
            meta.setdefault("annotations", {})[SLICE_NAME] = chain
        for fl in flavors.get(name, set()):
            labels = get_path(cluster.store.get(RF, "", fl), "spec", "nodeLabels", default={})
            if labels:
                sel = template.setdefault("spec", {}).setdefault("nodeSelector", {})
                sel.update(labels)
        if name in topology:
            gate_template(template, wl["metadata"]["name"])
        for update in updates or []:
            if update.get("name") == name:
                _apply_update(template, update)
    set_suspended(key, job, False)
    touch_job(cluster, key, job, json.dumps(job["spec"], sort_keys=True) != before)
    cluster.record_event(
        wl, "Normal", "Admitted", f"Admitted by ClusterQueue {cq_name}", "kueue-admission"
    )


def _apply_update(template: dict[str, Any], update: dict[str, Any]) -> None:
    """An admission check's ``podSetUpdate`` merged into the pod template of its pod set."""
    meta = template.setdefault("metadata", {})
    for part in ("labels", "annotations"):
        if update.get(part):
            meta.setdefault(part, {}).update(update[part])
    if update.get("nodeSelector"):
        template.setdefault("spec", {}).setdefault("nodeSelector", {}).update(
            update["nodeSelector"]
        )
    if update.get("tolerations"):
        have = template.setdefault("spec", {}).setdefault("tolerations", [])
        have.extend(t for t in update["tolerations"] if t not in have)
