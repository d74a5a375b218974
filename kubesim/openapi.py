"""OpenAPI documents as kube-apiserver serves them: ``/openapi/v3`` and ``/openapi/v2``.

kubectl reads ``/openapi/v3`` (an index, then one document per group-version) for
``explain``, apply's patches and field validation, and falls back to ``/openapi/v2`` (one
Swagger document, fetched as gnostic protobuf) for kinds the v3 documents do not name.
Custom kinds get their CRD schema with ``metadata`` as ObjectMeta; built-in kinds get the
Kubernetes schemas in ``openapi_builtin.json`` (see ``scripts/kubesim_builtin_schemas.py``).
Every answer carries an ETag and a matching ``If-None-Match`` gets 304, as kube-openapi does.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from functools import lru_cache
from typing import Any

from kubesim.errors import ApiError
from kubesim.openapi_proto import encode_document
from kubesim.resources import Registry, ResourceType

BUILTIN_FILE = os.path.join(os.path.dirname(__file__), "openapi_builtin.json")
V3_REF = "#/components/schemas/"
V2_REF = "#/definitions/"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
PROTOBUF_V2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
# Media types of /openapi/v2 in the order kube-openapi offers them.
_V2_TYPES = (
    "application/json",
    PROTOBUF_V2,
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
)
_METADATA_DESCRIPTION = (
    "Standard object's metadata. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)


@lru_cache(maxsize=1)
def builtin_schemas() -> dict[str, Any]:
    """The Kubernetes schemas of the built-in kinds kubesim serves, by definition name."""
    with open(BUILTIN_FILE, encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


@lru_cache(maxsize=1)
def _builtin_names() -> dict[tuple[str, str, str], str]:
    names = {}
    for name, schema in builtin_schemas().items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            names[(gvk["group"], gvk["version"], gvk["kind"])] = name
    return names


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def schema_name(rt: ResourceType, version: str) -> str:
    """The definition name of a kind (``io.k8s.api.core.v1.Pod``, ``io.ray.v1.RayCluster``)."""
    known = _builtin_names().get((rt.group, version, rt.kind))
    if known:
        return known
    if not rt.group:
        return f"io.k8s.api.core.{version}.{rt.kind}"
    reverse = ".".join(reversed(rt.group.split(".")))
    return f"{reverse}.{version}.{rt.kind}"


def _gvk(rt: ResourceType, version: str) -> dict[str, str]:
    return {"group": rt.group, "version": version, "kind": rt.kind}


def _kind_schema(rt: ResourceType, version: str) -> dict[str, Any]:
    """The v3 schema of one kind: the built-in definition, or the CRD's with ObjectMeta."""
    builtin = builtin_schemas().get(schema_name(rt, version))
    if builtin is not None and not rt.is_custom:
        return builtin
    schema = copy.deepcopy(rt.schemas.get(version)) or {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    props = schema.setdefault("properties", {})
    props.setdefault("apiVersion", {"type": "string"})
    props.setdefault("kind", {"type": "string"})
    props["metadata"] = {
        "allOf": [{"$ref": V3_REF + OBJECT_META}],
        "description": _METADATA_DESCRIPTION,
    }
    schema["x-kubernetes-group-version-kind"] = [_gvk(rt, version)]
    return schema


def _refs(schema: Any, found: set[str]) -> None:
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                found.add(value.rsplit("/", 1)[1])
            elif isinstance(value, dict | list):
                _refs(value, found)
    elif isinstance(schema, list):
        for item in schema:
            _refs(item, found)


def _with_closure(schemas: dict[str, Any]) -> dict[str, Any]:
    """``schemas`` plus every built-in definition they reach through ``$ref``."""
    builtins = builtin_schemas()
    todo: set[str] = set()
    _refs(schemas, todo)
    while todo:
        name = todo.pop()
        if name in schemas or name not in builtins:
            continue
        schemas[name] = builtins[name]
        _refs(builtins[name], todo)
    return schemas


def _parameters(v2: bool) -> list[dict[str, Any]]:
    names = ("fieldValidation", "fieldManager", "dryRun")
    if v2:
        return [{"name": n, "in": "query", "type": "string", "uniqueItems": True} for n in names]
    return [
        {"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}} for n in names
    ]


def _operation(rt: ResourceType, version: str, verb: str, name: str, v2: bool) -> dict[str, Any]:
    ref = {"$ref": (V2_REF if v2 else V3_REF) + name}
    params = _parameters(v2)
    op: dict[str, Any] = {"operationId": f"{verb}{rt.kind}"}
    has_body = verb in ("post", "put", "patch")
    ctype = "application/merge-patch+json" if verb == "patch" else "application/json"
    if v2:
        if has_body:
            params = [{"name": "body", "in": "body", "required": True, "schema": ref}, *params]
            op["consumes"] = [ctype]
        op["produces"] = ["application/json"]
        op["responses"] = {"200": {"description": "OK", "schema": ref}}
    else:
        op["responses"] = {
            "200": {"description": "OK", "content": {"application/json": {"schema": ref}}}
        }
        if has_body:
            op["requestBody"] = {"content": {ctype: {"schema": ref}}}
    op["parameters"] = params
    op["x-kubernetes-action"] = verb
    op["x-kubernetes-group-version-kind"] = _gvk(rt, version)
    return op


def _paths(reg: Registry, group: str, version: str, v2: bool) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    base = "/" + _gv_path(group, version)
    for rt in reg.in_group_version(group, version):
        name = schema_name(rt, version)
        prefix = (
            f"{base}/namespaces/{{namespace}}/{rt.plural}"
            if rt.namespaced
            else f"{base}/{rt.plural}"
        )
        paths[prefix] = {
            "get": _operation(rt, version, "list", name, v2),
            "post": _operation(rt, version, "post", name, v2),
        }
        paths[prefix + "/{name}"] = {
            verb: _operation(rt, version, action, name, v2)
            for verb, action in (
                ("get", "get"),
                ("put", "put"),
                ("patch", "patch"),
                ("delete", "delete"),
            )
        }
    return paths


def _document_v3(reg: Registry, group: str, version: str) -> dict[str, Any]:
    schemas = {
        schema_name(rt, version): _kind_schema(rt, version)
        for rt in reg.in_group_version(group, version)
    }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": _paths(reg, group, version, v2=False),
        "components": {"schemas": _with_closure(schemas)},
    }


def to_v2(schema: Any) -> Any:
    """A v3 schema in Swagger 2.0's terms: refs into ``definitions``, a one-``$ref`` ``allOf``
    folded back, and no ``oneOf``/``anyOf``/``not``/``nullable`` (which 2.0 lacks)."""
    if isinstance(schema, list):
        return [to_v2(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("oneOf", "anyOf", "not", "nullable"):
            continue
        if key == "$ref":
            out[key] = V2_REF + value.rsplit("/", 1)[1]
        elif key == "allOf" and len(value) == 1 and "$ref" in value[0]:
            out["$ref"] = V2_REF + value[0]["$ref"].rsplit("/", 1)[1]
        elif key in ("properties", "patternProperties", "definitions"):
            out[key] = {k: to_v2(v) for k, v in value.items()}
        elif key.startswith("x-kubernetes-") or key in ("enum", "default", "example", "required"):
            out[key] = value
        else:
            out[key] = to_v2(value)
    if schema.get("format") == "int-or-string" and "type" not in out:
        out["type"] = "string"
    if schema.get("format") == "quantity" and "type" not in out:
        out["type"] = "string"
    return out


def _document_v2(reg: Registry) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    definitions: dict[str, Any] = {}
    for group, version in reg.group_versions():
        paths.update(_paths(reg, group, version, v2=True))
        for rt in reg.in_group_version(group, version):
            definitions[schema_name(rt, version)] = _kind_schema(rt, version)
    _with_closure(definitions)
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "definitions": {name: to_v2(s) for name, s in sorted(definitions.items())},
    }


class _Served:
    """One representation of a document: its bytes and the ETag kube-openapi gives them."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.etag = '"' + hashlib.sha512(data).hexdigest().upper() + '"'


@lru_cache(maxsize=8)
def _v3_cached(reg_id: int, reg: Registry) -> dict[str, _Served]:
    return {
        _gv_path(g, v): _Served(json.dumps(_document_v3(reg, g, v)).encode())
        for g, v in reg.group_versions()
    }


@lru_cache(maxsize=4)
def _v2_cached(reg_id: int, reg: Registry) -> tuple[_Served, _Served]:
    doc = _document_v2(reg)
    return _Served(json.dumps(doc).encode()), _Served(encode_document(doc))


def _v3_index(docs: dict[str, _Served]) -> _Served:
    index = {
        "paths": {
            gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash={served.etag[1:33]}"}
            for gv, served in docs.items()
        }
    }
    return _Served(json.dumps(index).encode())


def _media_v2(accept: str) -> str | None:
    """The first media type of ``_V2_TYPES`` an Accept header allows, in its own order."""
    for clause in (accept or "*/*").split(","):
        wanted = clause.split(";", 1)[0].strip().lower()
        kind, _, sub = wanted.partition("/")
        for offer in _V2_TYPES:
            o_kind, _, o_sub = offer.partition("/")
            if kind in (o_kind, "*") and sub in (o_sub, "*"):
                return offer
    return None


def answer(
    reg: Registry, path: str, accept: str, if_none_match: str
) -> tuple[int, bytes, str, dict[str, str]]:
    """Status, body, content type and extra headers for a GET of ``/openapi/...``, given the
    request's ``Accept`` and ``If-None-Match`` headers ('' when absent)."""
    ctype = "application/json"
    if path == "/openapi/v2":
        media = _media_v2(accept)
        if media is None:
            return 406, b"", "text/plain", {"Vary": "Accept"}
        as_json, as_proto = _v2_cached(id(reg), reg)
        served = as_json if media == "application/json" else as_proto
        # Both protobuf offers are answered with the dotted name: Go's mime parser (client-go
        # reads every Content-Type with it) refuses the ``@`` of the name clients ask for.
        ctype = media if media == "application/json" else _V2_TYPES[2]
    elif path == "/openapi/v3":
        served = _v3_index(_v3_cached(id(reg), reg))
    else:
        found = None
        if path.startswith("/openapi/v3/"):
            found = _v3_cached(id(reg), reg).get(path[len("/openapi/v3/") :])
        if found is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        served = found
    extra = {"Etag": served.etag, "Vary": "Accept"}
    tags = {tag.strip() for tag in if_none_match.split(",")}
    if served.etag in tags or "*" in tags:
        return 304, b"", ctype, extra
    return 200, served.data, ctype, extra
