"""Write ``kubesim/openapi_builtin.json``: the OpenAPI v3 schemas of the built-in kinds kubesim
serves, and of every definition they reach.

The source is the Kubernetes v1.37.0 API definitions shipped by the ``kubernetes-validate``
package (a dev requirement; its ``_definitions.json`` is the published Kubernetes OpenAPI
turned into JSON Schema). This script turns them back into the form kube-apiserver publishes at
``/openapi/v3``: one type per schema (no ``null``), ``$ref`` into ``components/schemas`` and
wrapped in ``allOf`` when it carries a description, no ``enum`` on ``apiVersion``/``kind``, and
the ``int-or-string`` and ``quantity`` special types. Run it again after a Kubernetes upgrade::

    python scripts/kubesim_builtin_schemas.py
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import kubernetes_validate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kubesim.resources import BUILTINS  # noqa: E402

SOURCE = os.path.join(
    os.path.dirname(kubernetes_validate.__file__),
    "kubernetes-json-schema",
    "v1.37.0-local",
    "_definitions.json",
)
TARGET = os.path.join(ROOT, "kubesim", "openapi_builtin.json")
REF_PREFIX = "#/components/schemas/"
SPECIAL = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {
        "description": "IntOrString is a type that can hold an int32 or a string.",
        "format": "int-or-string",
        "oneOf": [{"type": "integer"}, {"type": "string"}],
    },
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {
        "description": "Quantity is a fixed-point representation of a number.",
        "format": "quantity",
        "oneOf": [{"type": "string"}, {"type": "number"}],
    },
}


def _normalise(schema: Any, top: bool = False) -> Any:
    if isinstance(schema, list):
        return [_normalise(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, list):
            kinds = [t for t in value if t != "null"]
            if kinds:
                out["type"] = kinds[0]
        elif key == "$ref":
            out["$ref"] = REF_PREFIX + value.rsplit("/", 1)[1]
        elif key == "properties":
            out["properties"] = {k: _normalise(v) for k, v in value.items()}
        else:
            out[key] = _normalise(value)
    if top and "x-kubernetes-group-version-kind" in out:
        for name in ("apiVersion", "kind"):
            out.get("properties", {}).get(name, {}).pop("enum", None)
    if "$ref" in out and len(out) > 1:
        ref = out.pop("$ref")
        out = {"allOf": [{"$ref": ref}], **out}
    return out


def _refs(schema: Any, found: set[str]) -> None:
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                found.add(value.rsplit("/", 1)[1])
            else:
                _refs(value, found)
    elif isinstance(schema, list):
        for item in schema:
            _refs(item, found)


def main() -> None:
    """Read the source definitions and write the closure of the served built-in kinds."""
    with open(SOURCE, encoding="utf-8") as fh:
        defs: dict[str, Any] = json.load(fh)["$defs"]
    wanted = {(rt.group, rt.versions[0], rt.kind) for rt in BUILTINS}
    roots = [
        name
        for name, schema in defs.items()
        for gvk in schema.get("x-kubernetes-group-version-kind") or []
        if (gvk["group"], gvk["version"], gvk["kind"]) in wanted
    ]
    missing = wanted - {
        (g["group"], g["version"], g["kind"])
        for name in roots
        for g in defs[name]["x-kubernetes-group-version-kind"]
    }
    if missing:
        raise SystemExit(f"no definition for {sorted(missing)}")
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        found: set[str] = set()
        _refs(defs[name], found)
        todo.extend(found - seen)
    out = {name: SPECIAL.get(name) or _normalise(defs[name], top=True) for name in sorted(seen)}
    with open(TARGET, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=None, separators=(",", ":"), sort_keys=True)
        fh.write("\n")
    print(f"{len(out)} schemas ({len(roots)} kinds) -> {os.path.relpath(TARGET, ROOT)}")


if __name__ == "__main__":
    main()
