"""Which field selectors each kind accepts, as the API server decides it.

Each kind registers the field labels it supports; custom resources and every other kind
take ``metadata.name`` and (namespaced) ``metadata.namespace``. Any other label is a 400
with the API server's own wording, so a client that works here meets no 400 on a real
cluster. Some labels are not plain paths (an Event's ``source``, a Pod's ``spec.host``):
:func:`convert` turns labels into the paths :func:`kubesim.store.field_value` reads
(``a|b``: ``a``, or ``b`` when ``a`` is empty).
"""

from __future__ import annotations

from kubesim.resources import ResourceType
from kubesim.store import SelectorError

_META = ("metadata.name", "metadata.namespace")

# Built-in kinds with their own conversion function: label -> path read on the object.
_BUILTIN: dict[str, dict[str, str]] = {
    "Pod": {
        **{m: m for m in _META},
        **{
            f: f
            for f in (
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            )
        },
        # The API server selects status.podIPs on the primary IP, which is status.podIP.
        "status.podIPs": "status.podIP",
        "spec.host": "spec.nodeName",
    },
    "Node": {"metadata.name": "metadata.name", "spec.unschedulable": "spec.unschedulable"},
    "Namespace": {"metadata.name": "metadata.name", "status.phase": "status.phase"},
    "Secret": {**{m: m for m in _META}, "type": "type"},
    # batch/v1 Job's conversion (pkg/apis/batch/v1): the count of succeeded pods.
    "Job": {**{m: m for m in _META}, "status.successful": "status.succeeded"},
    # resource.k8s.io's: what a DRA driver's kubelet plugin lists its own slices by.
    "ResourceSlice": {m: m for m in ("metadata.name", "spec.nodeName", "spec.driver")},
    "Service": {
        **{m: m for m in _META},
        "spec.clusterIP": "spec.clusterIP",
        "spec.type": "spec.type",
    },
    "Event": {
        **{m: m for m in _META},
        **{
            f"involvedObject.{f}": f"involvedObject.{f}"
            for f in (
                "kind",
                "namespace",
                "name",
                "uid",
                "apiVersion",
                "resourceVersion",
                "fieldPath",
            )
        },
        "reason": "reason",
        "reportingComponent": "reportingComponent",
        "source": "source.component|reportingComponent",
        "type": "type",
    },
}


def supported(rt: ResourceType) -> dict[str, str]:
    """The field labels ``rt`` accepts, each with the path it reads."""
    if rt.kind in _BUILTIN and not rt.is_custom:
        return _BUILTIN[rt.kind]
    if rt.is_custom and not rt.namespaced:
        return {"metadata.name": "metadata.name"}
    return {m: m for m in _META}


def _refusal(rt: ResourceType, label: str) -> str:
    """The API server's message for an unsupported label (three wordings, by case)."""
    if rt.is_custom or rt.kind in _BUILTIN:
        return f"field label not supported: {label}"
    # runtime.DefaultMetaV1FieldSelectorConversion, for kinds without a conversion function.
    return f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"'


def convert(rt: ResourceType, fields: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Parsed ``(label, op, value)`` clauses as ``(path, op, value)``; raises
    :class:`SelectorError` (answered 400) on a label ``rt`` does not support."""
    table = supported(rt)
    out = []
    for label, op, value in fields:
        path = table.get(label)
        if path is None:
            raise SelectorError(_refusal(rt, label))
        out.append((path, op, value))
    return out
