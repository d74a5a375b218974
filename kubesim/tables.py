"""Server-side printing (``meta.k8s.io/v1`` Table) for ``kubectl get``.

Columns follow what a real API server prints for pods, nodes, namespaces, services and
events; custom kinds use their CRD's ``additionalPrinterColumns``, whose JSONPath (filters
included) is evaluated by ``jsonpath.py`` and each cell typed as the CRD column says, as
apiextensions-apiserver's table convertor does.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kubesim.printcolumns import human_duration, printer_columns
from kubesim.resources import ResourceType
from kubesim.store import Obj
from kubesim.util import get_path, parse_time

if TYPE_CHECKING:
    from kubesim.cluster import Cluster


def age(stamp: str | None) -> str:
    """The age of a timestamp as the API server prints it; ``<unknown>`` when there is none."""
    if not stamp:
        return "<unknown>"
    now = datetime.datetime.now(datetime.UTC)
    return human_duration((now - parse_time(stamp)).total_seconds())


def _col(name: str, ctype: str = "string", priority: int = 0, fmt: str = "") -> dict[str, Any]:
    return {"name": name, "type": ctype, "format": fmt, "description": name, "priority": priority}


def _pod_row(o: Obj) -> list[Any]:
    st = o.get("status") or {}
    cs = st.get("containerStatuses") or []
    total = len((o.get("spec") or {}).get("containers") or [])
    ready = sum(1 for c in cs if c.get("ready"))
    status = st.get("phase", "Pending")
    # As kubectl's printPod: a container's waiting or terminated reason shows instead of the
    # phase (a finished Job pod is "Completed" or "Error", exit code when no reason).
    for c in reversed(cs):
        state = c.get("state") or {}
        if get_path(state, "waiting", "reason"):
            status = state["waiting"]["reason"]
        elif "terminated" in state:
            term = state["terminated"]
            status = term.get("reason") or f"ExitCode:{term.get('exitCode', 0)}"
    if o["metadata"].get("deletionTimestamp"):
        status = "Terminating"
    return [
        o["metadata"]["name"],
        f"{ready}/{total}",
        status,
        sum(int(c.get("restartCount", 0)) for c in cs),
        age(o["metadata"].get("creationTimestamp")),
        st.get("podIP") or "<none>",
        (o.get("spec") or {}).get("nodeName") or "<none>",
    ]


def _node_row(o: Obj) -> list[Any]:
    conds = get_path(o, "status", "conditions", default=[])
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)
    status = "Ready" if ready else "NotReady"
    if get_path(o, "spec", "unschedulable"):
        status += ",SchedulingDisabled"
    roles = [
        k.split("/", 1)[1]
        for k in (o["metadata"].get("labels") or {})
        if k.startswith("node-role.kubernetes.io/")
    ]
    return [
        o["metadata"]["name"],
        status,
        ",".join(roles) or "<none>",
        age(o["metadata"].get("creationTimestamp")),
        get_path(o, "status", "nodeInfo", "kubeletVersion", default=""),
    ]


def _svc_row(o: Obj) -> list[Any]:
    spec = o.get("spec") or {}
    ports = ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or [])
    return [
        o["metadata"]["name"],
        spec.get("type", "ClusterIP"),
        spec.get("clusterIP", ""),
        "<none>",
        ports or "<none>",
        age(o["metadata"].get("creationTimestamp")),
    ]


def _event_row(o: Obj) -> list[Any]:
    inv = o.get("involvedObject") or {}
    return [
        age(o.get("lastTimestamp") or o["metadata"].get("creationTimestamp")),
        o.get("type", ""),
        o.get("reason", ""),
        f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}",
        o.get("message", ""),
    ]


def _duration(seconds: int) -> str:
    """kubectl's short duration (``duration.HumanDuration`` for small values)."""
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60}s" if seconds < 600 else f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def _job_row(o: Obj) -> list[Any]:
    st = o.get("status") or {}
    spec = o.get("spec") or {}
    conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
    if conds.get("Complete") == "True":
        status = "Complete"
    elif conds.get("Failed") == "True":
        status = "Failed"
    elif conds.get("FailureTarget") == "True":
        status = "FailureTarget"
    elif conds.get("SuccessCriteriaMet") == "True":
        status = "SuccessCriteriaMet"
    elif spec.get("suspend"):
        status = "Suspended"
    else:
        status = "Running"
    start, end = st.get("startTime"), st.get("completionTime")
    if start:
        until = parse_time(end) if end else datetime.datetime.now(datetime.UTC)
        duration = _duration(max(0, int((until - parse_time(start)).total_seconds())))
    else:
        duration = ""
    return [
        o["metadata"]["name"],
        status,
        f"{int(st.get('succeeded') or 0)}/{int(spec.get('completions') or 1)}",
        duration,
        age(o["metadata"].get("creationTimestamp")),
    ]


_BUILTIN: dict[str, tuple[list[dict[str, Any]], Any]] = {
    "Job": (
        [
            _col("Name", fmt="name"),
            _col("Status"),
            _col("Completions"),
            _col("Duration"),
            _col("Age"),
        ],
        _job_row,
    ),
    "Pod": (
        [
            _col("Name", fmt="name"),
            _col("Ready"),
            _col("Status"),
            _col("Restarts", "integer"),
            _col("Age"),
            _col("IP", priority=1),
            _col("Node", priority=1),
        ],
        _pod_row,
    ),
    "Node": (
        [_col("Name", fmt="name"), _col("Status"), _col("Roles"), _col("Age"), _col("Version")],
        _node_row,
    ),
    "Service": (
        [
            _col("Name", fmt="name"),
            _col("Type"),
            _col("Cluster-IP"),
            _col("External-IP"),
            _col("Port(s)"),
            _col("Age"),
        ],
        _svc_row,
    ),
    "Event": (
        [_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Message")],
        _event_row,
    ),
    "Namespace": (
        [_col("Name", fmt="name"), _col("Status"), _col("Age")],
        lambda o: [
            o["metadata"]["name"],
            get_path(o, "status", "phase", default="Active"),
            age(o["metadata"].get("creationTimestamp")),
        ],
    ),
}


def _row_object(o: Obj, include: str) -> Obj | None:
    """What a row carries by ``includeObject``: the API server's default is the object's
    metadata only (``PartialObjectMetadata``), which is all ``kubectl get`` reads unless it
    sorts (then it asks for ``Object``)."""
    if include == "None":
        return None
    if include == "Object":
        return o
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": o["metadata"],
    }


def table(
    cluster: Cluster,
    rt: ResourceType,
    version: str,
    items: list[Obj],
    meta: dict[str, Any],
    include: str = "Metadata",
) -> dict[str, Any]:
    """A Table of ``items`` with the kind's columns; each row carries its object as
    ``include`` (``includeObject``: ``None``, ``Metadata`` or ``Object``) asks."""
    if rt.kind in _BUILTIN:
        cols, fn = _BUILTIN[rt.kind]
        rows = [{"cells": fn(o), "object": o} for o in items]
    elif rt.printer_columns.get(version):
        columns = printer_columns(rt, version)
        cols = [_col("Name", fmt="name")] + [dict(c.definition) for c in columns]
        rows = [
            {"cells": [o["metadata"]["name"], *(c.cell(o) for c in columns)], "object": o}
            for o in items
        ]
    else:
        cols = [_col("Name", fmt="name"), _col("Age")]
        rows = [
            {
                "cells": [o["metadata"]["name"], age(o["metadata"].get("creationTimestamp"))],
                "object": o,
            }
            for o in items
        ]
    for row in rows:
        carried = _row_object(row["object"], include)
        if carried is None:
            del row["object"]
        else:
            row["object"] = carried
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": cols,
        "rows": rows,
    }
