"""What kube-apiserver checks of a ``scheduling.k8s.io/v1`` PriorityClass beyond its
schema: a value (an int32, at most one billion unless the class is a ``system-`` one,
and fixed once created), a known preemption policy, and the ``system-`` names reserved
to Kubernetes' own classes."""

from __future__ import annotations

from typing import Any

from kubesim.errors import Cause

HIGHEST_USER_DEFINED = 1_000_000_000
INT32 = (-(2**31), 2**31 - 1)
POLICIES = ("Never", "PreemptLowerPriority")


def validate(obj: dict[str, Any]) -> list[Cause]:
    """The causes a create or update of ``obj`` is refused for (none: valid)."""
    causes: list[Cause] = []
    name = str((obj.get("metadata") or {}).get("name") or "")
    value = obj.get("value")
    if value is None:
        causes.append(Cause("value", "FieldValueRequired", "Required value"))
    elif not isinstance(value, int) or isinstance(value, bool) or not INT32[0] <= value <= INT32[1]:
        causes.append(Cause("value", "FieldValueInvalid", f"Invalid value: {value!r}"))
    elif value > HIGHEST_USER_DEFINED and not name.startswith("system-"):
        causes.append(
            Cause(
                "value",
                "FieldValueForbidden",
                f"Forbidden: maximum allowed value of a user defined priority is "
                f"{HIGHEST_USER_DEFINED}",
            )
        )
    if name.startswith("system-"):
        causes.append(
            Cause(
                "metadata.name",
                "FieldValueForbidden",
                "Forbidden: priority class names with 'system-' prefix are reserved",
            )
        )
    policy = obj.get("preemptionPolicy")
    if policy is not None and policy not in POLICIES:
        causes.append(
            Cause(
                "preemptionPolicy",
                "FieldValueNotSupported",
                f'Unsupported value: "{policy}": supported values: "Never", "PreemptLowerPriority"',
            )
        )
    return causes


def validate_update(old: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    """An update may not change the value nor the preemption policy (the rest is
    checked as on create)."""
    causes: list[Cause] = []
    for field in ("value", "preemptionPolicy"):
        if old.get(field) != new.get(field) and old.get(field) is not None:
            causes.append(
                Cause(field, "FieldValueForbidden", "Forbidden: may not be changed in an update.")
            )
    return causes
