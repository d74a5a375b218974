"""Server-side printing (``meta.k8s.io/v1`` Table) for ``kubectl get``.

Built-in kinds get the columns kube-apiserver's printers give them (pods, nodes, namespaces,
services, events, jobs, configmaps, secrets, service accounts, quotas, network policies,
endpoints, pod templates, limit ranges, RBAC kinds, CRDs); custom kinds their CRD's
``additionalPrinterColumns``, evaluated by ``printcolumns.py``.
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
        st.get("nominatedNodeName") or "<none>",
        _readiness_gates(o),
    ]


def _readiness_gates(o: Obj) -> str:
    """``N/M`` of the pod's readiness gates whose condition is True, ``<none>`` without gates."""
    gates = get_path(o, "spec", "readinessGates", default=[]) or []
    if not gates:
        return "<none>"
    true = {
        c.get("type")
        for c in get_path(o, "status", "conditions", default=[]) or []
        if c.get("status") == "True"
    }
    return f"{sum(1 for g in gates if g.get('conditionType') in true)}/{len(gates)}"


def _node_row(o: Obj) -> list[Any]:
    addresses = get_path(o, "status", "addresses", default=[]) or []
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
        *(
            next((a.get("address") for a in addresses if a.get("type") == kind), None) or "<none>"
            for kind in ("InternalIP", "ExternalIP")
        ),
        *(
            get_path(o, "status", "nodeInfo", key, default="") or "<unknown>"
            for key in ("osImage", "kernelVersion", "containerRuntimeVersion")
        ),
    ]


def _svc_row(o: Obj) -> list[Any]:
    spec = o.get("spec") or {}
    ports = ",".join(
        f"{p.get('port')}:{p['nodePort']}/{p.get('protocol', 'TCP')}"
        if p.get("nodePort")
        else f"{p.get('port')}/{p.get('protocol', 'TCP')}"
        for p in spec.get("ports") or []
    )
    return [
        o["metadata"]["name"],
        spec.get("type", "ClusterIP"),
        spec.get("clusterIP") or "<none>",
        _external_ip(o),
        ports or "<none>",
        age(o["metadata"].get("creationTimestamp")),
        _labels(spec.get("selector")),
    ]


def _external_ip(o: Obj) -> str:
    """The service printer's EXTERNAL-IP: external IPs, a load balancer's ingress addresses
    (``<pending>`` until it has one), ``<none>`` otherwise."""
    spec = o.get("spec") or {}
    external = list(spec.get("externalIPs") or [])
    if spec.get("type") == "LoadBalancer":
        ingress = get_path(o, "status", "loadBalancer", "ingress", default=[]) or []
        found = [
            i.get("ip") or i.get("hostname") for i in ingress if i.get("ip") or i.get("hostname")
        ]
        return ",".join(found + external) or "<pending>"
    return ",".join(external) or "<none>"


def _event_row(o: Obj) -> list[Any]:
    inv = o.get("involvedObject") or {}
    return [
        age(o.get("lastTimestamp") or o["metadata"].get("creationTimestamp")),
        o.get("type", ""),
        o.get("reason", ""),
        f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}",
        o.get("message", ""),
    ]


def _job_row(o: Obj) -> list[Any]:
    st = o.get("status") or {}
    spec = o.get("spec") or {}
    containers = get_path(spec, "template", "spec", "containers", default=[]) or []
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
        duration = human_duration((until - parse_time(start)).total_seconds())
    else:
        duration = ""
    return [
        o["metadata"]["name"],
        status,
        f"{int(st.get('succeeded') or 0)}/{int(spec.get('completions') or 1)}",
        duration,
        age(o["metadata"].get("creationTimestamp")),
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        _selector(spec.get("selector")),
    ]


def _name_age(o: Obj, *middle: Any) -> list[Any]:
    return [o["metadata"]["name"], *middle, age(o["metadata"].get("creationTimestamp"))]


def _created_at(o: Obj) -> list[Any]:
    return [o["metadata"]["name"], o["metadata"].get("creationTimestamp") or ""]


def _labels(labels: dict[str, str] | None) -> str:
    """``labels.FormatLabels``: ``a=b,c=d`` in key order, ``<none>`` when empty."""
    return ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or "<none>"


def _selector(sel: dict[str, Any] | None) -> str:
    """``metav1.FormatLabelSelector``: its requirements in key order, ``<none>`` when empty."""
    parts = [(k, f"{k}={v}") for k, v in (sel or {}).get("matchLabels", {}).items()]
    for expr in (sel or {}).get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        text = {
            "In": f"{key} in ({','.join(sorted(values))})",
            "NotIn": f"{key} notin ({','.join(sorted(values))})",
            "Exists": key,
            "DoesNotExist": f"!{key}",
        }.get(op, key)
        parts.append((key, text))
    return ",".join(text for _, text in sorted(parts)) or "<none>"


def _quota_row(o: Obj) -> list[Any]:
    hard = get_path(o, "status", "hard", default={}) or {}
    used = get_path(o, "status", "used", default={}) or {}
    requests: list[str] = []
    limits: list[str] = []
    for name in sorted(hard):
        pair = f"{name}: {used.get(name, '0')}/{hard[name]}"
        (limits if name.startswith("limits.") else requests).append(pair)
    return [
        o["metadata"]["name"],
        age(o["metadata"].get("creationTimestamp")),
        ", ".join(requests),
        ", ".join(limits),
    ]


def _binding_row(o: Obj) -> list[Any]:
    ref = o.get("roleRef") or {}
    subjects = o.get("subjects") or []

    def named(kind: str) -> str:
        return ",".join(s.get("name", "") for s in subjects if s.get("kind") == kind)

    accounts = ",".join(
        f"{s.get('namespace', '')}/{s.get('name', '')}"
        for s in subjects
        if s.get("kind") == "ServiceAccount"
    )
    role = f"{ref.get('kind', '')}/{ref.get('name', '')}"
    return [*_name_age(o, role), named("User"), named("Group"), accounts]


def _claim_state(o: Obj) -> str:
    """A ResourceClaim's ``State`` column: pending, allocated, reserved, deleted..."""
    deleted = bool(o["metadata"].get("deletionTimestamp"))
    states = ["deleted"] if deleted else []
    if not get_path(o, "status", "allocation"):
        return ",".join(states or ["pending"])
    states.append("allocated")
    if get_path(o, "status", "reservedFor"):
        states.append("reserved")
    elif deleted:
        states.append("deallocating")
    return ",".join(states)


def _endpoints(o: Obj) -> str:
    """``formatEndpoints``: the first three ``ip:port`` pairs and how many more."""
    subsets = o.get("subsets") or []
    if not subsets:
        return "<none>"
    shown: list[str] = []
    count = 0
    for subset in subsets:
        ips = [a.get("ip", "") for a in subset.get("addresses") or []]
        ports = [p.get("port") for p in subset.get("ports") or []] or [None]
        for port in ports:
            count += len(ips)
            for ip in ips:
                if len(shown) < 3:
                    shown.append(ip if port is None else f"{ip}:{port}")
    more = count - len(shown)
    return ",".join(shown) + (f" + {more} more..." if more > 0 else "")


def _pod_template_row(o: Obj) -> list[Any]:
    containers = get_path(o, "template", "spec", "containers", default=[]) or []
    return [
        o["metadata"]["name"],
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        _labels(get_path(o, "template", "metadata", "labels", default={})),
    ]


_CREATED_AT = ([_col("Name", fmt="name"), _col("Created At", "date")], _created_at)
_BINDING = (
    [
        _col("Name", fmt="name"),
        _col("Role"),
        _col("Age"),
        _col("Users", priority=1),
        _col("Groups", priority=1),
        _col("ServiceAccounts", priority=1),
    ],
    _binding_row,
)


_BUILTIN: dict[str, tuple[list[dict[str, Any]], Any]] = {
    "Job": (
        [
            _col("Name", fmt="name"),
            _col("Status"),
            _col("Completions"),
            _col("Duration"),
            _col("Age"),
            _col("Containers", priority=1),
            _col("Images", priority=1),
            _col("Selector", priority=1),
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
            _col("Nominated Node", priority=1),
            _col("Readiness Gates", priority=1),
        ],
        _pod_row,
    ),
    "Node": (
        [
            _col("Name", fmt="name"),
            _col("Status"),
            _col("Roles"),
            _col("Age"),
            _col("Version"),
            _col("Internal-IP", priority=1),
            _col("External-IP", priority=1),
            _col("OS-Image", priority=1),
            _col("Kernel-Version", priority=1),
            _col("Container-Runtime", priority=1),
        ],
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
            _col("Selector", priority=1),
        ],
        _svc_row,
    ),
    "Event": (
        [_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Message")],
        _event_row,
    ),
    "ConfigMap": (
        [_col("Name", fmt="name"), _col("Data"), _col("Age")],
        lambda o: _name_age(o, len(o.get("data") or {}) + len(o.get("binaryData") or {})),
    ),
    "Secret": (
        [_col("Name", fmt="name"), _col("Type"), _col("Data"), _col("Age")],
        lambda o: _name_age(o, o.get("type", ""), len(o.get("data") or {})),
    ),
    "ServiceAccount": (
        [_col("Name", fmt="name"), _col("Secrets"), _col("Age")],
        lambda o: _name_age(o, len(o.get("secrets") or [])),
    ),
    "ResourceQuota": (
        [_col("Name", fmt="name"), _col("Age"), _col("Request"), _col("Limit")],
        _quota_row,
    ),
    "NetworkPolicy": (
        [_col("Name", fmt="name"), _col("Pod-Selector"), _col("Age")],
        lambda o: _name_age(o, _selector(get_path(o, "spec", "podSelector", default={}))),
    ),
    "Endpoints": (
        [_col("Name", fmt="name"), _col("Endpoints"), _col("Age")],
        lambda o: _name_age(o, _endpoints(o)),
    ),
    "PodTemplate": (
        [_col("Template", fmt="name"), _col("Containers"), _col("Images"), _col("Pod Labels")],
        _pod_template_row,
    ),
    "DeviceClass": ([_col("Name", fmt="name"), _col("Age")], _name_age),
    "ResourceClaimTemplate": ([_col("Name", fmt="name"), _col("Age")], _name_age),
    "ResourceClaim": (
        [_col("Name", fmt="name"), _col("State"), _col("Age")],
        lambda o: _name_age(o, _claim_state(o)),
    ),
    "ResourceSlice": (
        [_col("Name", fmt="name"), _col("Node"), _col("Driver"), _col("Pool"), _col("Age")],
        lambda o: _name_age(
            o,
            get_path(o, "spec", "nodeName", default="") or "<none>",
            get_path(o, "spec", "driver", default=""),
            get_path(o, "spec", "pool", "name", default=""),
        ),
    ),
    "LimitRange": _CREATED_AT,
    "Role": _CREATED_AT,
    "ClusterRole": _CREATED_AT,
    "CustomResourceDefinition": _CREATED_AT,
    "RoleBinding": _BINDING,
    "ClusterRoleBinding": _BINDING,
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
