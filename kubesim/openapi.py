"""OpenAPI v3 documents, enough for ``kubectl apply`` to trust the server's field validation.

kubectl reads ``/openapi/v3`` (an index of group-versions) and then one document per
group-version; it needs ``components.schemas`` carrying ``x-kubernetes-group-version-kind``
and ``paths`` whose create/patch operations list a ``fieldValidation`` parameter. Custom
kinds get their CRD schema; built-in kinds get an open object schema (kubesim does not ship
the full Kubernetes OpenAPI).
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any

from kubesim.resources import Registry, ResourceType


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _schema_name(rt: ResourceType, version: str) -> str:
    if not rt.group:
        return f"io.k8s.api.core.{version}.{rt.kind}"
    reverse = ".".join(reversed(rt.group.split(".")))
    return f"{reverse}.{version}.{rt.kind}"


def _gvk(rt: ResourceType, version: str) -> list[dict[str, str]]:
    return [{"group": rt.group, "version": version, "kind": rt.kind}]


def _operation(rt: ResourceType, version: str, verb: str, name: str) -> dict[str, Any]:
    params = [
        {
            "name": "fieldValidation",
            "in": "query",
            "schema": {"type": "string", "uniqueItems": True},
        },
        {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
        {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
    ]
    ref = {"$ref": f"#/components/schemas/{name}"}
    op: dict[str, Any] = {
        "operationId": f"{verb}{rt.kind}",
        "parameters": params,
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": ref}}}
        },
        "x-kubernetes-action": verb,
        "x-kubernetes-group-version-kind": _gvk(rt, version)[0],
    }
    if verb in ("post", "put", "patch"):
        ctype = "application/merge-patch+json" if verb == "patch" else "application/json"
        op["requestBody"] = {"content": {ctype: {"schema": ref}}}
    return op


def _document(reg: Registry, group: str, version: str) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    base = "/" + _gv_path(group, version)
    for rt in reg.in_group_version(group, version):
        name = _schema_name(rt, version)
        if rt.is_custom and version in rt.schemas:
            schema = json.loads(json.dumps(rt.schemas[version]))
        else:
            schema = {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                },
            }
        schema["x-kubernetes-group-version-kind"] = _gvk(rt, version)
        schemas[name] = schema
        prefix = (
            f"{base}/namespaces/{{namespace}}/{rt.plural}"
            if rt.namespaced
            else f"{base}/{rt.plural}"
        )
        paths[prefix] = {
            "get": _operation(rt, version, "list", name),
            "post": _operation(rt, version, "post", name),
        }
        paths[prefix + "/{name}"] = {
            "get": _operation(rt, version, "get", name),
            "put": _operation(rt, version, "put", name),
            "patch": _operation(rt, version, "patch", name),
            "delete": _operation(rt, version, "delete", name),
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (kubesim)", "version": version},
        "paths": paths,
        "components": {"schemas": schemas},
    }


@lru_cache(maxsize=8)
def _cached(reg_id: int, reg: Registry) -> dict[str, bytes]:
    docs: dict[str, bytes] = {}
    for group, version in reg.group_versions():
        docs[_gv_path(group, version)] = json.dumps(_document(reg, group, version)).encode()
    return docs


def document(reg: Registry, path: str) -> dict[str, Any] | bytes | None:
    """Answer ``/openapi/v3`` (the index) or ``/openapi/v3/<gv path>``; None when unknown."""
    docs = _cached(id(reg), reg)
    if path == "/openapi/v3":
        return {
            "paths": {
                gv: {
                    "serverRelativeURL": (
                        f"/openapi/v3/{gv}?hash={hashlib.sha256(body).hexdigest()[:32]}"
                    )
                }
                for gv, body in docs.items()
            }
        }
    if path.startswith("/openapi/v3/"):
        return docs.get(path[len("/openapi/v3/") :])
    return None
