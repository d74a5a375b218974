"""Field ownership: ``metadata.managedFields`` as the API server's field manager keeps it.

A field set is a set of FieldsV1 paths (``f:<name>``, ``k:<json>`` for an associative
list's item by its keys, ``v:<json>`` for a set's item; atomic lists and maps are
leaves). An update gives its manager the fields it changed and takes them from the
others; a server-side apply owns exactly the fields it sent, drops those it no longer
sends (unless another owns them), and is a 409 when it would change another manager's
field, unless forced.
"""

from __future__ import annotations

import json
from typing import Any

from kubesim import errors
from kubesim.patch import MERGE_KEYS, SET_LISTS
from kubesim.resources import ResourceType
from kubesim.util import now

Path = tuple[str, ...]
APPLY, UPDATE = "Apply", "Update"
# Fields of built-in kinds that are maps (``map[string]...`` in Go), not structs.
MAP_FIELDS = frozenset(
    {
        "labels",
        "annotations",
        "data",
        "binaryData",
        "stringData",
        "nodeSelector",
        "matchLabels",
        "limits",
        "requests",
        "hard",
        "capacity",
        "allocatable",
        "selector",
    }
)
# The metadata a field manager tracks; the rest is the server's.
_TRACKED_META = ("labels", "annotations", "ownerReferences", "finalizers")


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _list_kind(schema: dict[str, Any] | None, name: str, items: list[Any]) -> tuple[str, list[str]]:
    """``("map", keys)``, ``("set", [])`` or ``("atomic", [])`` for a list: from the CRD
    schema when there is one (a list without a list type is atomic), else by field name
    as the built-in kinds' merge keys say."""
    if schema is not None and schema.get("type") == "array":
        kind = schema.get("x-kubernetes-list-type") or "atomic"
        return kind, list(schema.get("x-kubernetes-list-map-keys") or [])
    if name in SET_LISTS:
        return "set", []
    if not items or not all(isinstance(i, dict) for i in items):
        return "atomic", []
    if name == "ports":
        first = "containerPort" if "containerPort" in items[0] else "port"
        return "map", [first, "protocol"]
    key = MERGE_KEYS.get(name)
    return ("map", [key]) if key else ("atomic", [])


def _child(schema: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
    if schema is None:
        return None
    props = schema.get("properties") or {}
    if key in props:
        return props[key]  # type: ignore[no-any-return]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def _item_key(item: dict[str, Any], keys: list[str]) -> str:
    return "k:" + _dumps({k: item[k] for k in keys if k in item})


class Walk:
    """The paths of one object: ``leaves`` (path -> value, list items included) and
    ``interior`` (maps and struct nodes with children)."""

    def __init__(self, obj: dict[str, Any], schema: dict[str, Any] | None, status: bool) -> None:
        self.leaves: dict[Path, Any] = {}
        self.items: set[Path] = set()
        self.interior: set[Path] = set()
        top: dict[str, Any] = {}
        if status:
            if "status" in obj:
                top["status"] = obj["status"]
        else:
            meta = obj.get("metadata") or {}
            tracked = {k: meta[k] for k in _TRACKED_META if meta.get(k)}
            if tracked:
                top["metadata"] = tracked
            top.update(
                (k, v)
                for k, v in obj.items()
                if k not in ("apiVersion", "kind", "metadata", "status")
            )
        self._map(top, schema, ())

    def _map(self, value: dict[str, Any], schema: dict[str, Any] | None, path: Path) -> None:
        for key, child in value.items():
            sub = None if key == "metadata" and not path else _child(schema, key)
            self._value(child, sub, key, (*path, f"f:{key}"))

    def _value(self, value: Any, schema: dict[str, Any] | None, name: str, path: Path) -> None:
        atomic = schema is not None and schema.get("x-kubernetes-map-type") == "atomic"
        if isinstance(value, dict) and value and not atomic:
            if _is_map(schema, name):
                self.interior.add(path)
            self._map(value, schema, path)
        elif isinstance(value, list) and value:
            kind, keys = _list_kind(schema, name, value)
            items = _child_items(schema)
            if kind == "map":
                for item in value:
                    at = (*path, _item_key(item, keys))
                    self.items.add(at)
                    self.leaves[at] = item
                    self._map(item, items, at)
            elif kind == "set":
                for item in value:
                    self.leaves[(*path, "v:" + _dumps(item))] = item
            else:
                self.leaves[path] = value
        else:
            self.leaves[path] = value


def _is_map(schema: dict[str, Any] | None, name: str) -> bool:
    """A map (its own member once it has keys, ``.`` in FieldsV1), not a struct."""
    if schema is not None:
        return "additionalProperties" in schema or (
            bool(schema.get("x-kubernetes-preserve-unknown-fields")) and "properties" not in schema
        )
    return name in MAP_FIELDS


def _child_items(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    if schema is None:
        return None
    items = schema.get("items")
    return items if isinstance(items, dict) else None


def schema_of(rt: ResourceType, version: str) -> dict[str, Any] | None:
    """The CRD schema of ``rt`` at ``version`` (None for built-ins)."""
    return rt.schemas.get(version) or rt.schemas.get(rt.storage_version)


# -- FieldsV1 --------------------------------------------------------------------------


def encode(paths: set[Path]) -> dict[str, Any]:
    """A set of paths as FieldsV1 (``.`` marks a member that also has members below)."""
    root: dict[str, Any] = {}
    for path in sorted(paths, key=len):
        node = root
        for element in path:
            node = node.setdefault(element, {})
    for path in paths:
        node = root
        for element in path:
            node = node[element]
        if node:
            node["."] = {}
    return _sorted(root)


def _sorted(node: dict[str, Any]) -> dict[str, Any]:
    return {k: _sorted(node[k]) for k in sorted(node, key=lambda k: (k != ".", k))}


def decode(fields: Any, prefix: Path = ()) -> set[Path]:
    """The paths of a FieldsV1 document."""
    out: set[Path] = set()
    if not isinstance(fields, dict):
        return out
    for key, sub in fields.items():
        if key == ".":
            out.add(prefix)
        elif isinstance(sub, dict) and sub:
            out |= decode(sub, (*prefix, key))
        else:
            out.add((*prefix, key))
    return out


def describe(path: Path) -> str:
    """A path as the API server prints it in a conflict (``.spec.containers[name="a"].image``)."""
    out = ""
    for element in path:
        kind, _, rest = element.partition(":")
        if kind == "f":
            out += f".{rest}"
        elif kind == "k":
            key = json.loads(rest)
            out += "[" + ",".join(f"{k}={_dumps(v)}" for k, v in key.items()) + "]"
        elif kind == "v":
            out += f"[={rest}]"
        else:
            out += f"[{rest}]"
    return out


# -- entries ---------------------------------------------------------------------------


class Entries:
    """The managedFields entries of an object, decoded, in their order."""

    def __init__(self, managed: Any) -> None:
        self.entries: list[tuple[dict[str, Any], set[Path]]] = []
        for entry in managed if isinstance(managed, list) else []:
            if isinstance(entry, dict) and entry.get("manager") is not None:
                self.entries.append((dict(entry), decode(entry.get("fieldsV1"))))

    def find(self, manager: str, operation: str, api_version: str, sub: str) -> int | None:
        """The index of one manager's entry."""
        for i, (entry, _) in enumerate(self.entries):
            if (
                entry.get("manager") == manager
                and entry.get("operation") == operation
                and (operation == APPLY or entry.get("apiVersion") == api_version)
                and (entry.get("subresource") or "") == sub
            ):
                return i
        return None

    def put(
        self, manager: str, operation: str, api_version: str, sub: str, paths: set[Path]
    ) -> None:
        """Set one manager's entry (its time now); an entry left empty goes."""
        at = self.find(manager, operation, api_version, sub)
        entry: dict[str, Any] = {
            "manager": manager,
            "operation": operation,
            "apiVersion": api_version,
            "time": now(),
            "fieldsType": "FieldsV1",
        }
        if sub:
            entry["subresource"] = sub
        if at is None:
            self.entries.append((entry, paths))
        else:
            self.entries[at] = (entry, paths)

    def take(self, paths: set[Path], but: int | None = None) -> None:
        """Remove ``paths`` from every entry except ``but``."""
        for i, (entry, owned) in enumerate(self.entries):
            if i != but and owned & paths:
                self.entries[i] = (entry, owned - paths)

    def render(self) -> list[dict[str, Any]]:
        """The managedFields list (entries owning nothing are dropped)."""
        out = []
        for entry, owned in self.entries:
            if owned:
                entry = {**entry, "fieldsV1": encode(owned)}
                order = ("manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1")
                out.append({k: entry[k] for k in (*order, "subresource") if k in entry})
        return out


def updated(
    rt: ResourceType,
    version: str,
    old: dict[str, Any] | None,
    new: dict[str, Any],
    manager: str,
    subresource: str,
) -> list[dict[str, Any]]:
    """managedFields after a create or update by ``manager``: it owns what it changed or
    added, which nobody else owns any more; what it removed nobody owns."""
    schema = schema_of(rt, version)
    status = subresource == "status"
    after = Walk(new, schema, status)
    entries = Entries((old or {}).get("metadata", {}).get("managedFields"))
    if old is None:
        changed = set(after.leaves) | after.interior
        gone: set[Path] = set()
    else:
        before = Walk(old, schema, status)
        changed = {
            p for p, v in after.leaves.items() if p not in before.leaves or before.leaves[p] != v
        }
        changed -= after.items & set(before.leaves)  # an item kept is not changed itself
        changed |= after.interior - before.interior
        gone = (set(before.leaves) - set(after.leaves)) | (before.interior - after.interior)
    api_version = rt.api_version(version)
    entries.take(changed | gone)
    at = entries.find(manager, UPDATE, api_version, subresource)
    mine = entries.entries[at][1] if at is not None else set()
    if changed or at is not None:
        entries.put(manager, UPDATE, api_version, subresource, (mine - gone) | changed)
    return entries.render()


def _prefixes(paths: set[Path]) -> set[Path]:
    return {p[:i] for p in paths for i in range(1, len(p) + 1)}


def applied(
    rt: ResourceType,
    version: str,
    live: dict[str, Any] | None,
    config: dict[str, Any],
    merged: dict[str, Any],
    manager: str,
    subresource: str,
    force: bool,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The object and managedFields after ``manager`` applied ``config`` (``merged``:
    ``config`` merged into ``live``). 409 Conflict when it would change another
    manager's fields, unless ``force`` takes them."""
    schema = schema_of(rt, version)
    status = subresource == "status"
    mine = set(Walk(config, schema, status).leaves)
    entries = Entries((live or {}).get("metadata", {}).get("managedFields"))
    at = entries.find(manager, APPLY, "", subresource)
    if live is not None:
        before, after = Walk(live, schema, status), Walk(merged, schema, status)
        changed = {
            p
            for p in mine
            if p in before.leaves
            and p in after.leaves
            and p not in after.items  # an item changes only through its fields
            and before.leaves[p] != after.leaves[p]
        }
        conflicts = [
            (entry, p)
            for i, (entry, owned) in enumerate(entries.entries)
            if i != at
            for p in sorted(owned & changed)
        ]
        if conflicts and not force:
            raise conflict(conflicts)
        entries.take(changed, but=at)
        if at is not None:
            others = _prefixes(
                {p for i, (_, owned) in enumerate(entries.entries) if i != at for p in owned}
            )
            for path in sorted(entries.entries[at][1] - mine, key=len, reverse=True):
                if path not in others:
                    _remove(merged, path)
    entries.put(manager, APPLY, rt.api_version(version), subresource, mine)
    return merged, entries.render()


def _who(entry: dict[str, Any]) -> str:
    who = json.dumps(entry.get("manager"))
    if entry.get("subresource"):
        who += f' with subresource "{entry["subresource"]}"'
    if entry.get("operation") == UPDATE:
        who += f" using {entry.get('apiVersion')}"
    return who


def conflict(conflicts: list[tuple[dict[str, Any], Path]]) -> errors.ApiError:
    """409 Conflict in the API server's words, one FieldManagerConflict cause a field."""
    causes = [
        {
            "type": "FieldManagerConflict",
            "message": f"conflict with {_who(e)}",
            "field": describe(p),
        }
        for e, p in conflicts
    ]
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {_who(entry)}: {describe(path)}"
    else:
        by: dict[str, list[str]] = {}
        for entry, path in conflicts:
            by.setdefault(_who(entry), []).append(describe(path))
        lines = []
        for who in sorted(by):
            lines.append(f"conflicts with {who}:")
            lines.extend(f"- {p}" for p in by[who])
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return errors.ApiError(409, "Conflict", message, {"causes": causes})


def _matches(item: Any, kind: str, want: Any) -> bool:
    if kind == "v":
        return bool(item == want)
    return isinstance(item, dict) and all(item.get(k) == v for k, v in want.items())


def _remove(obj: Any, path: Path) -> None:
    """Delete the field or item at ``path`` from ``obj`` (nothing when it is not there)."""
    node = obj
    for i, element in enumerate(path):
        last = i == len(path) - 1
        kind, _, rest = element.partition(":")
        if kind == "f" and isinstance(node, dict) and rest in node:
            if last:
                del node[rest]
                return
            node = node[rest]
        elif kind in ("k", "v") and isinstance(node, list):
            want = json.loads(rest)
            match = next((j for j, x in enumerate(node) if _matches(x, kind, want)), None)
            if match is None:
                return
            if last:
                node.pop(match)
                return
            node = node[match]
        else:
            return


def merge(live: Any, config: Any, schema: dict[str, Any] | None = None, name: str = "") -> Any:
    """``config`` merged into ``live`` as an apply merges: maps by key, associative lists
    by their keys, sets as unions, anything else replaced."""
    if isinstance(live, dict) and isinstance(config, dict):
        out = dict(live)
        for key, value in config.items():
            sub = None if key == "metadata" and not name else _child(schema, key)
            out[key] = merge(live.get(key), value, sub, key or "-")
        return out
    if isinstance(live, list) and isinstance(config, list):
        kind, keys = _list_kind(schema, name, config or live)
        if kind == "set":
            return live + [x for x in config if x not in live]
        if kind == "map":
            items = _child_items(schema)
            result = list(live)
            for item in config:
                key = _item_key(item, keys)
                at = next(
                    (
                        i
                        for i, x in enumerate(result)
                        if isinstance(x, dict) and _item_key(x, keys) == key
                    ),
                    None,
                )
                if at is None:
                    result.append(item)
                else:
                    result[at] = merge(result[at], item, items, "-")
            return result
    return json.loads(json.dumps(config))
