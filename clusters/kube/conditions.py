"""Reading a Kubernetes object's ``status.conditions`` (Kueue Workloads, ProvisioningRequests)."""

from __future__ import annotations

from typing import Any


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The condition of type ``kind`` in ``obj``'s status (a copy), or ``{}``."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return {}
