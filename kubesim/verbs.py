"""The API verbs: what the API server does with each request on a resource.

One function per verb, reached through :func:`handle` with the cluster's lock held. Each
checks what the request may do (preconditions, conflicts, names, immutable fields,
``dryRun``, ``fieldValidation``), writes through the cluster's pipeline and settles the
controllers, so the answer shows a settled cluster. ``server.py`` parses HTTP and routes
here; answers are objects, Tables or a ``Status``, as the API server shapes them.
"""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any

from kubesim import errors, fieldlabels, managedfields, priorityclasses, tables
from kubesim.dra import validation as dra_validation
from kubesim.patch import json_patch, merge_patch, strategic_merge_patch
from kubesim.resources import ResourceType
from kubesim.store import Obj, SelectorError, parse_field_selector
from kubesim.validation import drop_nulls, validate_builtin, validate_metadata, validate_pod_update

if TYPE_CHECKING:
    from kubesim.cluster import Cluster


def handle(
    cluster: Cluster,
    *,
    method: str,
    rt: ResourceType,
    version: str,
    ns: str | None,
    name: str,
    subresource: str,
    body: Any,
    ctype: str,
    params: dict[str, str],
    want_table: bool,
) -> tuple[int, Any]:
    """Run the verb of one request on ``rt`` (the lock held); the status code and the
    answer. ``ns`` is None for a request across namespaces, ``name`` empty for one on the
    collection; ``want_table`` asks for server-side Table printing of a GET. Reads answer
    JSON bytes already encoded (see :func:`encode_list`), other answers objects."""
    nsv = ns or ""
    # Events past their TTL go before anything can read them (cheap when none is due).
    cluster.expire_events()
    include = params.get("includeObject") or "Metadata"
    if method == "GET" and name:
        result = get(cluster, rt, version, nsv, name)
        if want_table:
            return 200, tables.table(cluster, rt, version, [result], {}, include)
        return 200, encode_object(cluster, rt, version, result)
    if method == "GET" and want_table:
        result = list_collection(cluster, rt, version, ns, params)
        return 200, tables.table(cluster, rt, version, result["items"], result["metadata"], include)
    if method == "GET":
        items, meta = _select(cluster, rt, ns, params)
        return 200, encode_list(cluster, rt, version, items, meta)

    if method == "POST" and not name:
        return 201, create(cluster, rt, version, nsv, body, params)
    if method == "PUT" and name:
        return 200, replace(cluster, rt, version, nsv, name, body, subresource, params)
    if method == "PATCH" and name:
        existed = cluster.store.get(rt.key, nsv if rt.namespaced else "", name)
        result = patch(cluster, rt, version, nsv, name, body, ctype, subresource, params)
        # Server-side apply of an absent object creates it, and answers 201 as it would.
        return (201 if existed is None else 200), result
    if method == "DELETE" and name:
        obj, still = delete(cluster, rt, version, nsv, name, body, params)
        if still or rt.kind in ("Pod", "Namespace") or rt.group == "resource.k8s.io":
            # The API server answers with the object while it is still there (finalizers),
            # and always for the kinds whose store returns it (pods, namespaces, the DRA
            # kinds: their OpenAPI answers name the kind); otherwise with a Success Status.
            return 200, obj
        return 200, _deleted(rt, obj)
    if method == "DELETE":
        return 200, delete_collection(cluster, rt, version, ns, params)
    raise errors.method_not_allowed()


def _deleted(rt: ResourceType, obj: Obj) -> dict[str, Any]:
    """The ``Status`` answering the deletion of ``obj``."""
    meta = obj["metadata"]
    details: dict[str, Any] = {
        "name": meta["name"],
        "kind": rt.plural,
        "uid": meta["uid"],
    }
    if rt.group:
        details["group"] = rt.group
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def out(rt: ResourceType, version: str, obj: Obj) -> Obj:
    """The object as served at ``version`` (only apiVersion differs between versions)."""
    api_version = rt.api_version(version)
    if obj.get("apiVersion") == api_version:
        return obj
    return {**obj, "apiVersion": api_version}


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def encode_object(cluster: Cluster, rt: ResourceType, version: str, obj: Obj) -> bytes:
    """JSON of one object as served at ``version``: the stored object's from the store's
    cache, a copy served at another version (only apiVersion differs) encoded afresh."""
    meta = obj["metadata"]
    if cluster.store.get(rt.key, meta.get("namespace", ""), meta["name"]) is obj:
        return cluster.store.encoded(rt.key, obj)
    return _dumps(obj)


def encode_list(
    cluster: Cluster, rt: ResourceType, version: str, stored: list[Obj], meta: dict[str, Any]
) -> bytes:
    """A list answer as JSON: its envelope encoded, its items' cached bytes joined.

    ``stored`` are the store's own objects (as :meth:`Store.select` returns them).
    Encoding dominated the cost of large lists (0.6 s of 0.7 s for 20,000 pods); objects
    change far less often than they are listed, so each is encoded once per
    resourceVersion."""
    api_version = rt.api_version(version)
    encoded = cluster.store.encoded
    items = b",".join(
        encoded(rt.key, o) if o.get("apiVersion") == api_version else _dumps(out(rt, version, o))
        for o in stored
    )
    head = _dumps({"kind": rt.list_kind, "apiVersion": api_version, "metadata": meta})
    return head[:-1] + b',"items":[' + items + b"]}"


def _find(cluster: Cluster, rt: ResourceType, ns: str, name: str) -> Obj:
    """The stored object, or 404."""
    obj = cluster.store.get(rt.key, ns if rt.namespaced else "", name)
    if obj is None:
        raise errors.not_found(rt.plural, rt.group, name)
    return obj


def _prepare(cluster: Cluster, rt: ResourceType, version: str, body: Any, strict: bool) -> Obj:
    """A request body checked for its kind and validated: custom objects against their
    CRD schema (unknown fields pruned with a warning, or refused when ``strict``), built-ins
    with the light checks."""
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request must be a JSON/YAML object")
    if body.get("kind") not in (None, rt.kind):
        # A Secret sent to the configmaps collection is refused, not stored as a ConfigMap.
        raise errors.bad_request(
            f"the object provided is unrecognized (must be of type {rt.kind}): "
            f"the body is a {body['kind']}"
        )
    if rt.is_custom:
        body, pruned = cluster.validator.prepare_custom(rt, version, body, strict)
        if pruned:
            cluster.warnings.append("; ".join(f'unknown field "{p}"' for p in pruned))
    else:
        body = drop_nulls(body)
        validate_builtin(rt, body)
    return body


def _omit_empty(meta: dict[str, Any]) -> None:
    """Drop empty metadata maps and lists, as the API server's typed ObjectMeta does
    (``omitempty``): a patch leaving ``annotations: {}`` stores no annotations."""
    for key in ("labels", "annotations", "finalizers", "ownerReferences", "managedFields"):
        if key in meta and not meta[key]:
            del meta[key]


def _manager(params: dict[str, str]) -> str:
    return params.get("fieldManager") or "unknown"


def create(
    cluster: Cluster,
    rt: ResourceType,
    version: str,
    ns: str,
    body: Any,
    params: dict[str, str],
    apply: bool = False,
) -> Obj:
    """POST to a collection (or a server-side apply of an absent object, ``apply``)."""
    if "create" not in rt.verbs:
        raise errors.method_not_allowed()
    strict = params.get("fieldValidation", "") == "Strict"
    obj = _prepare(cluster, rt, version, body, strict)
    meta = obj.setdefault("metadata", {})
    _omit_empty(meta)
    meta.pop("managedFields", None)
    if apply:
        force = params.get("force") in ("true", "1")
        _, managed = managedfields.applied(rt, version, None, obj, obj, _manager(params), "", force)
    else:
        managed = managedfields.updated(rt, version, None, obj, _manager(params), "")
    if managed:
        meta["managedFields"] = managed
    if rt.namespaced:
        if meta.get("namespace") and meta["namespace"] != ns:
            raise errors.bad_request(
                "the namespace of the provided object does not match "
                "the namespace sent on the request"
            )
        meta["namespace"] = ns
    if rt.kind in ("Pod", "Node") and "status" in obj and rt.kind == "Pod":
        obj.pop("status")
    if rt.is_custom:
        cluster.validator.check_rules(rt, version, obj, None)
    cluster.kueue.validate(rt, obj)
    created = cluster.create_object(rt, obj, dry_run=bool(params.get("dryRun")))
    if not params.get("dryRun"):
        cluster.settle()
    return out(rt, version, created)


def get(cluster: Cluster, rt: ResourceType, version: str, ns: str, name: str) -> Obj:
    """GET one object (or its /status)."""
    return out(rt, version, _find(cluster, rt, ns, name))


def list_collection(
    cluster: Cluster, rt: ResourceType, version: str, ns: str | None, params: dict[str, str]
) -> Obj:
    """GET a collection with selectors and pagination."""
    items, meta = _select(cluster, rt, ns, params)
    return {
        "kind": rt.list_kind,
        "apiVersion": rt.api_version(version),
        "metadata": meta,
        "items": [out(rt, version, o) for o in items],
    }


def _select(
    cluster: Cluster, rt: ResourceType, ns: str | None, params: dict[str, str]
) -> tuple[list[Obj], dict[str, Any]]:
    """The stored objects a list call selects, and the list's metadata."""
    try:
        limit = int(params.get("limit") or 0)
        # Only the field labels the kind supports, as the API server allows (400 otherwise).
        fields = fieldlabels.convert(rt, parse_field_selector(params.get("fieldSelector")))
        items, token = cluster.store.select(
            rt.key,
            ns if rt.namespaced else None,
            params.get("labelSelector"),
            fields,
            limit,
            params.get("continue") or None,
        )
    except SelectorError as exc:
        raise errors.bad_request(str(exc)) from exc
    except ValueError as exc:
        raise errors.ApiError(
            410,
            "Expired",
            "The provided continue parameter is too old to display a consistent list result.",
        ) from exc
    meta: dict[str, Any] = {"resourceVersion": str(cluster.store.rv)}
    if token:
        meta["continue"] = token
    return items, meta


# Named exception to ruff's C901 (max-complexity 12): update semantics in the API server's order
# (preconditions, resourceVersion, generation).
def _write_update(  # noqa: C901
    cluster: Cluster,
    rt: ResourceType,
    version: str,
    old: Obj,
    new: Obj,
    subresource: str,
    params: dict[str, str],
    managed: list[dict[str, Any]] | None = None,
) -> Obj:
    """Shared tail of PUT and PATCH: checks, generation, managed fields (``managed``: an
    apply's, already worked out), store, settle."""
    strict = params.get("fieldValidation", "") == "Strict"
    meta, ometa = new.setdefault("metadata", {}), old["metadata"]
    if meta.get("name", ometa["name"]) != ometa["name"]:
        raise errors.bad_request(
            f"the name of the object ({meta.get('name')}) does not "
            f"match the name on the URL ({ometa['name']})"
        )
    rv = meta.get("resourceVersion")
    if rv and rv != ometa["resourceVersion"]:
        raise errors.conflict(rt.plural, rt.group, ometa["name"])
    new = _prepare(cluster, rt, version, new, strict)
    meta = new["metadata"]
    if subresource == "status":
        # Only the status moves through /status; the rest of the object is kept.
        merged = copy.deepcopy(old)
        merged["status"] = new.get("status")
        new = drop_nulls(merged)
    elif rt.status_subresource and rt.kind not in ("Namespace",):
        if "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        else:
            new.pop("status", None)
    validate_metadata(rt, new)
    for k in (
        "uid",
        "creationTimestamp",
        "namespace",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ):
        if k in ometa:
            meta[k] = ometa[k]
        else:
            meta.pop(k, None)
    _omit_empty(meta)
    if managed is None:
        managed = managedfields.updated(rt, version, old, new, _manager(params), subresource)
    meta["managedFields"] = managed
    _omit_empty(meta)
    new["apiVersion"], new["kind"] = rt.api_version(), rt.kind
    if subresource != "status" and rt.has_generation:
        changed = {k: v for k, v in new.items() if k not in ("metadata", "status")} != {
            k: v for k, v in old.items() if k not in ("metadata", "status")
        }
        if changed:
            meta["generation"] = int(ometa.get("generation", 1)) + 1
    if rt.kind == "Pod":
        validate_pod_update(old, new)
    elif (
        rt.group == "resource.k8s.io"
        and (causes := dra_validation.validate_update(rt.kind, old, new))
    ) or (rt.kind == "PriorityClass" and (causes := priorityclasses.validate_update(old, new))):
        raise errors.invalid(rt.kind, rt.group, ometa["name"], causes)
    if rt.is_custom:
        cluster.validator.check_rules(rt, version, new, old)
    if subresource != "status":
        cluster.kueue.validate(rt, new)
        cluster.autoscaler.validate(rt, new, old)
    if params.get("dryRun"):
        return out(rt, version, new)
    cluster.update_object(rt, new, old)
    cluster.settle()
    return out(rt, version, new)


def replace(
    cluster: Cluster,
    rt: ResourceType,
    version: str,
    ns: str,
    name: str,
    body: Any,
    subresource: str,
    params: dict[str, str],
) -> Obj:
    """PUT an object or its /status."""
    old = _find(cluster, rt, ns, name)
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request must be an object")
    if rt.is_custom and not (body.get("metadata") or {}).get("resourceVersion"):
        raise errors.invalid(
            rt.kind,
            rt.group,
            name,
            [
                errors.Cause(
                    "metadata.resourceVersion",
                    "FieldValueInvalid",
                    "Invalid value: 0x0: must be specified for an update",
                )
            ],
        )
    return _write_update(cluster, rt, version, old, copy.deepcopy(body), subresource, params)


# Named exception to ruff's C901 (max-complexity 12): one branch per patch type and the
# apply/create-on-patch cases.
def patch(  # noqa: C901
    cluster: Cluster,
    rt: ResourceType,
    version: str,
    ns: str,
    name: str,
    body: Any,
    ctype: str,
    subresource: str,
    params: dict[str, str],
) -> Obj:
    """PATCH with merge, strategic merge, JSON patch or server-side apply."""
    obj = cluster.store.get(rt.key, ns if rt.namespaced else "", name)
    if ctype == "application/apply-patch+yaml":
        if not isinstance(body, dict):
            raise errors.bad_request("apply patch must be an object")
        if params.get("fieldManager") is None:
            raise errors.bad_request(
                "PATCH requests with apply patch type must include a fieldManager"
            )
        if obj is None:
            if subresource:
                raise errors.not_found(rt.plural, rt.group, name)
            body.setdefault("metadata", {})["name"] = name
            return create(cluster, rt, version, ns, body, params, apply=True)
        config = drop_nulls(body)
        schema = managedfields.schema_of(rt, version)
        new = managedfields.merge(copy.deepcopy(obj), config, schema)
        new, managed = managedfields.applied(
            rt,
            version,
            obj,
            config,
            new,
            _manager(params),
            subresource,
            params.get("force") in ("true", "1"),
        )
        if not (body.get("metadata") or {}).get("resourceVersion"):
            new["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
        return _write_update(cluster, rt, version, obj, new, subresource, params, managed)
    if obj is None:
        raise errors.not_found(rt.plural, rt.group, name)
    current = copy.deepcopy(obj)
    if ctype == "application/merge-patch+json":
        new = merge_patch(current, body)
    elif ctype == "application/strategic-merge-patch+json":
        if rt.is_custom:
            raise errors.ApiError(
                415,
                "UnsupportedMediaType",
                "strategic merge patch is not supported for custom resources",
            )
        new = strategic_merge_patch(current, body)
    elif ctype == "application/json-patch+json":
        new = json_patch(current, body)
    else:
        raise errors.unsupported_media(ctype, errors.PATCH_TYPES)
    if not isinstance(new, dict):
        raise errors.bad_request("the patch produced something that is not an object")
    return _write_update(cluster, rt, version, obj, new, subresource, params)


def delete(
    cluster: Cluster,
    rt: ResourceType,
    version: str,
    ns: str,
    name: str,
    body: Any,
    params: dict[str, str],
) -> tuple[Obj, bool]:
    """DELETE; returns the object and whether it is still present (finalizers)."""
    obj = _find(cluster, rt, ns, name)
    opts = body if isinstance(body, dict) else {}
    pre = opts.get("preconditions") or {}
    if pre.get("uid") and pre["uid"] != obj["metadata"]["uid"]:
        raise errors.conflict(rt.plural, rt.group, name)
    if pre.get("resourceVersion") and pre["resourceVersion"] != obj["metadata"]["resourceVersion"]:
        raise errors.conflict(rt.plural, rt.group, name)
    propagation = params.get("propagationPolicy") or opts.get("propagationPolicy") or "Background"
    if opts.get("orphanDependents") is True:
        propagation = "Orphan"
    if params.get("dryRun") or opts.get("dryRun"):
        return out(rt, version, obj), True
    cluster.delete_object(rt, obj, propagation)
    cluster.settle()
    still = cluster.store.get(rt.key, ns if rt.namespaced else "", name)
    return out(rt, version, still or obj), still is not None


def delete_collection(
    cluster: Cluster, rt: ResourceType, version: str, ns: str | None, params: dict[str, str]
) -> Obj:
    """DELETE a collection matching selectors."""
    doc = list_collection(
        cluster,
        rt,
        version,
        ns,
        {k: v for k, v in params.items() if k in ("labelSelector", "fieldSelector")},
    )
    for obj in list(doc["items"]):
        live = cluster.store.get(
            rt.key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
        )
        if live is not None:
            cluster.delete_object(rt, live, params.get("propagationPolicy") or "Background")
    cluster.settle()
    return doc
