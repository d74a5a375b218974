"""Taints and tolerations, shared by the scheduler (node taints) and Kueue (a
ResourceFlavor's ``nodeTaints``): whether a pod's tolerations cover a taint, and a taint
written as kube-scheduler writes it in a ``FailedScheduling`` message."""

from __future__ import annotations

from typing import Any


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    """True when one of ``tolerations`` covers ``taint`` (Kubernetes' matching rules: the
    effect must agree unless left empty; ``Exists`` without a key tolerates everything;
    ``Equal``, the default operator, also compares the value)."""
    for tol in tolerations:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        op = tol.get("operator", "Equal")
        if not tol.get("key"):
            if op == "Exists":
                return True
            continue
        if tol["key"] != taint.get("key"):
            continue
        if op == "Exists" or tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def taint_text(taint: dict[str, Any]) -> str:
    """``{key: value}``, as kube-scheduler names an untolerated taint."""
    return "{" + f"{taint.get('key', '')}: {taint.get('value', '')}" + "}"
