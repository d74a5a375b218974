"""Patch flavours: JSON merge patch (RFC 7386), a strategic merge patch for built-in kinds,
and JSON patch (RFC 6902); server-side apply's merge is ``managedfields.py``'s.

The strategic merge patch knows the merge keys of the lists that matter in practice
(containers by name, ports by containerPort/port, env by name, volumes by name, ...) and the
``$patch`` / ``$deleteFromPrimitiveList`` / ``$setElementOrder`` directives kubectl emits;
other lists are replaced, as the merge-patch strategy would do.
"""

from __future__ import annotations

import copy
from typing import Any

from kubesim.errors import bad_request

# Lists merged element by element, and the key that identifies an element.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "secrets": "name",
}
# Lists of scalars merged as sets.
SET_LISTS = {"finalizers"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _port_key(items: list[Any]) -> str | None:
    if items and isinstance(items[0], dict):
        if "containerPort" in items[0]:
            return "containerPort"
        if "port" in items[0]:
            return "port"
    return None


def strategic_merge_patch(target: Any, patch: Any, field: str = "") -> Any:
    """A strategic merge patch as the API server applies it to built-in kinds (simplified)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            result[name] = [x for x in result.get(name) or [] if x not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, key)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value, key)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_list(current: Any, patch: list[Any], field: str) -> list[Any]:
    current = current if isinstance(current, list) else []
    if field in SET_LISTS:
        out = list(current)
        out.extend(x for x in patch if x not in out)
        return out
    key = MERGE_KEYS.get(field) or (_port_key(patch) if field == "ports" else None)
    if key is None or not all(isinstance(x, dict) for x in patch):
        return [copy.deepcopy(x) for x in patch if not (isinstance(x, dict) and "$patch" in x)]
    out = [copy.deepcopy(x) for x in current]
    for item in patch:
        ident = item.get(key)
        idx = next(
            (i for i, x in enumerate(out) if isinstance(x, dict) and x.get(key) == ident), None
        )
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
            continue
        if idx is None:
            out.append({k: copy.deepcopy(v) for k, v in item.items() if k != "$patch"})
        else:
            out[idx] = strategic_merge_patch(out[idx], item, field)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    cur = doc
    for p in parts:
        if isinstance(cur, list):
            cur = cur[int(p)]
        elif isinstance(cur, dict):
            cur = cur[p]
        else:
            raise KeyError(p)
    return cur


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 operations: add, remove, replace, move, copy, test."""
    if not isinstance(ops, list):
        raise bad_request("json patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        try:
            kind, parts = op["op"], _pointer(op["path"])
            if kind == "test":
                if _walk(doc, parts) != op.get("value"):
                    raise bad_request(f"testing value {op['path']} failed")
                continue
            if kind in ("move", "copy"):
                src = _pointer(op["from"])
                value = copy.deepcopy(_walk(doc, src))
                if kind == "move":
                    _remove(doc, src)
                doc = _add(doc, parts, value)
            elif kind == "add":
                doc = _add(doc, parts, copy.deepcopy(op.get("value")))
            elif kind == "remove":
                _remove(doc, parts)
            elif kind == "replace":
                _remove(doc, parts)
                doc = _add(doc, parts, copy.deepcopy(op.get("value")))
            else:
                raise bad_request(f"unknown json patch operation {kind!r}")
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise bad_request(
                f"the server rejected our request due to an error in our "
                f"request: json patch {op!r} failed: {exc}"
            ) from exc
    return doc


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            parent.insert(int(last), value)
    else:
        parent[last] = value
    return doc


def _remove(doc: Any, parts: list[str]) -> None:
    parent = _walk(doc, parts[:-1])
    if isinstance(parent, list):
        parent.pop(int(parts[-1]))
    else:
        del parent[parts[-1]]
