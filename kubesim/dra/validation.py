"""The API server's validation and defaulting of the ``resource.k8s.io/v1`` kinds.

Defaults as ``pkg/apis/resource/v1``'s (``allocationMode`` ExactCount, ``count`` 1) are
applied first; then the checks of ``pkg/apis/resource/validation`` that a user can trip:
request names, exactly one of ``exactly``/``firstAvailable``, the allocation mode and
count, the device class name, CEL selectors that must compile, a slice's driver, pool and
node. The causes carry the API server's field paths and words.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kubesim.dra.allocator import compile_error
from kubesim.errors import Cause

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
    "[a-z0-9])?)*')"
)
_MODES = ("All", "ExactCount")
_BOTH = "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"


def _go(value: Any) -> str:
    if value is None:
        return '"null"'
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _invalid(path: str, value: Any, msg: str) -> Cause:
    return Cause(path, "FieldValueInvalid", f"Invalid value: {_go(value)}: {msg}")


def _required(path: str, msg: str = "") -> Cause:
    return Cause(path, "FieldValueRequired", "Required value" + (f": {msg}" if msg else ""))


def _default_selection(sel: dict[str, Any]) -> None:
    sel.setdefault("allocationMode", "ExactCount")
    if sel["allocationMode"] == "ExactCount" and not sel.get("count"):
        sel["count"] = 1


def default_claim_spec(spec: Any) -> None:
    """Fill in what the API server defaults in a ResourceClaimSpec."""
    if not isinstance(spec, dict):
        return
    for req in (spec.get("devices") or {}).get("requests") or []:
        if not isinstance(req, dict):
            continue
        if isinstance(req.get("exactly"), dict):
            _default_selection(req["exactly"])
        for sub in req.get("firstAvailable") or []:
            if isinstance(sub, dict):
                _default_selection(sub)


def _selectors(selectors: Any, path: str) -> list[Cause]:
    causes = []
    for i, sel in enumerate(selectors or []):
        cel = (sel or {}).get("cel") if isinstance(sel, dict) else None
        if not isinstance(cel, dict):
            causes.append(_required(f"{path}[{i}].cel"))
            continue
        expr = str(cel.get("expression") or "")
        if not expr:
            causes.append(_required(f"{path}[{i}].cel.expression", "expression is required"))
            continue
        err = compile_error(expr)
        if err:
            causes.append(_invalid(f"{path}[{i}].cel.expression", expr, err))
    return causes


def _selection(sel: dict[str, Any], path: str) -> list[Cause]:
    causes = []
    cls = sel.get("deviceClassName")
    if not cls:
        causes.append(_required(f"{path}.deviceClassName"))
    elif not _DNS_SUBDOMAIN.match(str(cls)) or len(str(cls)) > 253:
        causes.append(_invalid(f"{path}.deviceClassName", cls, _SUBDOMAIN_MSG))
    causes += _selectors(sel.get("selectors"), f"{path}.selectors")
    mode, count = sel.get("allocationMode"), sel.get("count") or 0
    if mode == "All":
        if count:
            causes.append(
                _invalid(
                    f"{path}.count", count, "must not be specified when allocationMode is 'All'"
                )
            )
    elif mode == "ExactCount":
        if not isinstance(count, int) or count <= 0:
            causes.append(_invalid(f"{path}.count", count, "must be greater than zero"))
    else:
        supported = ", ".join(f'"{m}"' for m in _MODES)
        causes.append(
            Cause(
                f"{path}.allocationMode",
                "FieldValueNotSupported",
                f"Unsupported value: {_go(mode)}: supported values: {supported}",
            )
        )
    return causes


def _name(name: Any, path: str) -> list[Cause]:
    if not name:
        return [_required(path)]
    if len(str(name)) > 63 or not _DNS_LABEL.match(str(name)):
        return [_invalid(path, name, _LABEL_MSG)]
    return []


def validate_claim_spec(spec: Any, path: str) -> list[Cause]:
    """The causes of an invalid ResourceClaimSpec at ``path``."""
    causes: list[Cause] = []
    spec = spec if isinstance(spec, dict) else {}
    seen: set[str] = set()
    for i, req in enumerate((spec.get("devices") or {}).get("requests") or []):
        rp = f"{path}.devices.requests[{i}]"
        req = req if isinstance(req, dict) else {}
        causes += _name(req.get("name"), f"{rp}.name")
        if req.get("name") in seen:
            causes.append(
                Cause(f"{rp}.name", "FieldValueDuplicate", f"Duplicate value: {_go(req['name'])}")
            )
        seen.add(str(req.get("name")))
        exact, first = req.get("exactly"), req.get("firstAvailable") or []
        if exact is None and not first:
            causes.append(_required(rp, "exactly one of `exactly` or `firstAvailable` is required"))
        elif exact is not None and first:
            causes.append(_invalid(rp, None, _BOTH))
        elif exact is not None:
            causes += _selection(exact if isinstance(exact, dict) else {}, f"{rp}.exactly")
        else:
            for j, sub in enumerate(first):
                sp = f"{rp}.firstAvailable[{j}]"
                sub = sub if isinstance(sub, dict) else {}
                causes += _name(sub.get("name"), f"{sp}.name") + _selection(sub, sp)
    return causes


def validate(kind: str, obj: dict[str, Any]) -> list[Cause]:
    """Default ``obj`` (a ``resource.k8s.io`` object) in place and return its causes."""
    spec = obj.get("spec")
    if kind == "ResourceClaim":
        default_claim_spec(spec)
        return validate_claim_spec(spec, "spec")
    if kind == "ResourceClaimTemplate":
        inner = (spec or {}).get("spec") if isinstance(spec, dict) else None
        default_claim_spec(inner)
        return validate_claim_spec(inner, "spec.spec")
    if kind == "DeviceClass":
        return _selectors((spec or {}).get("selectors"), "spec.selectors")
    if kind == "ResourceSlice":
        return _slice(spec if isinstance(spec, dict) else {})
    return []


def _slice(spec: dict[str, Any]) -> list[Cause]:
    causes = []
    if not spec.get("driver"):
        causes.append(_required("spec.driver"))
    if not (spec.get("pool") or {}).get("name"):
        causes.append(_required("spec.pool.name"))
    placed = [
        k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection") if spec.get(k)
    ]
    if len(placed) != 1:
        causes.append(
            _required(
                "spec",
                "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                "`perDeviceNodeSelection` is required",
            )
        )
    for i, dev in enumerate(spec.get("devices") or []):
        causes += _name((dev or {}).get("name"), f"spec.devices[{i}].name")
    return causes


def validate_update(kind: str, old: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    """A claim's and a template's spec are immutable (the wording is approximated: the API
    server prints the Go value of the whole spec)."""
    if kind in ("ResourceClaim", "ResourceClaimTemplate") and old.get("spec") != new.get("spec"):
        return [_invalid("spec", "object", "field is immutable")]
    return []
