"""Validation of written objects.

Custom objects are checked against the ``openAPIV3Schema`` of their CRD, as the API server
does: nulls are dropped, schema defaults are filled in, unknown fields are pruned (or refused
with ``fieldValidation=Strict``), then the object is validated; every violation becomes a
``StatusCause`` naming the field. Built-in kinds get light checks (names, required fields;
a pod's spec may change only where Kubernetes allows it).
CEL rules (``x-kubernetes-validations``) are evaluated by :mod:`kubesim.celrules`.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import jsonschema

from kubesim import celrules, priorityclasses, quantity
from kubesim.dra import validation as dra_validation
from kubesim.errors import ApiError, Cause, bad_request, invalid
from kubesim.resources import ResourceType

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

# Kinds whose names must be DNS-1123 labels (63 chars) rather than subdomains.
_LABEL_NAMED = {"namespaces", "services"}


def drop_nulls(value: Any) -> Any:
    """Remove null map values recursively (the API server prunes them)."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


def _to_jsonschema(schema: Any) -> Any:
    """Turn an OpenAPI v3 structural schema into a draft-4 JSON schema."""
    if isinstance(schema, list):
        return [_to_jsonschema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") or key in ("default", "format", "example"):
            continue
        if key == "properties":
            out[key] = {k: _to_jsonschema(v) for k, v in value.items()}
        elif key == "pattern" and isinstance(value, str) and value.startswith("^(?i)"):
            # Go's RE2 takes flags anywhere (Kueue's AdmissionCheck kind pattern);
            # Python's re only at the start.
            out[key] = "(?i)^" + value[len("^(?i)") :]
        else:
            out[key] = _to_jsonschema(value)
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    out.pop("nullable", None)
    return out


def _path(parts: Any) -> str:
    text = ""
    for p in parts:
        text += f"[{p}]" if isinstance(p, int) else (f".{p}" if text else str(p))
    return text


def _go_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def _cause(err: jsonschema.ValidationError) -> Cause:
    field = _path(err.absolute_path)
    where = field or "<root>"
    inst = err.instance
    if err.validator == "required":
        missing = re.findall(r"'([^']+)' is a required property", err.message)
        name = missing[0] if missing else ""
        full = f"{field}.{name}" if field else name
        return Cause(full, "FieldValueRequired", "Required value")
    if err.validator == "type":
        want = err.validator_value
        want = want[0] if isinstance(want, list) else want
        return Cause(
            field,
            "FieldValueTypeInvalid",
            f"Invalid value: {_go_value(inst)}: {where} in body must be of type "
            f"{want}: {_go_value(type(inst).__name__ if not isinstance(inst, str) else inst)}",
        )
    if err.validator == "enum":
        allowed = ", ".join(_go_value(v) for v in err.validator_value)
        return Cause(
            field,
            "FieldValueNotSupported",
            f"Unsupported value: {_go_value(inst)}: supported values: {allowed}",
        )
    words = {
        "minimum": f"should be greater than or equal to {err.validator_value}",
        "maximum": f"should be less than or equal to {err.validator_value}",
        "pattern": f"should match '{err.validator_value}'",
        "maxLength": f"may not be longer than {err.validator_value}",
        "minLength": f"should be at least {err.validator_value} chars long",
        "maxItems": f"must have at most {err.validator_value} items",
        "minItems": f"should have at least {err.validator_value} items",
    }
    detail = words.get(str(err.validator), err.message)
    return Cause(
        field, "FieldValueInvalid", f"Invalid value: {_go_value(inst)}: {where} in body {detail}"
    )


def _apply_defaults(obj: Any, schema: dict[str, Any]) -> None:
    """Fill in schema defaults for absent properties of present objects."""
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        for name, sub in props.items():
            if name not in obj and "default" in sub:
                obj[name] = copy.deepcopy(sub["default"])
            if name in obj:
                _apply_defaults(obj[name], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name, value in obj.items():
                if name not in props:
                    _apply_defaults(value, extra)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            _apply_defaults(item, schema["items"])


# Named exception to ruff's C901 (max-complexity 12): structural-schema pruning walks each JSON
# Schema keyword.
def _prune(  # noqa: C901
    obj: Any, schema: dict[str, Any], path: str, unknown: list[str], root: bool = False
) -> None:
    """Remove fields the schema does not declare (unless it preserves unknown fields)."""
    if isinstance(obj, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if props is not None or (extra is None and schema.get("type") == "object"):
            props = props or {}
            for name in list(obj):
                if name in props:
                    continue
                if root and name in ("apiVersion", "kind", "metadata"):
                    continue
                if isinstance(extra, dict) or extra is True:
                    continue
                unknown.append(f"{path}.{name}" if path else name)
                del obj[name]
        for name, value in obj.items():
            if root and name == "metadata":
                continue  # ObjectMeta is the API server's, not the CRD schema's
            sub = (props or {}).get(name) if props is not None else None
            if sub is None and isinstance(extra, dict):
                sub = extra
            if sub is not None:
                _prune(value, sub, f"{path}.{name}" if path else name, unknown)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            _prune(item, schema["items"], f"{path}[{i}]", unknown)


# Compiled validators, shared by every simulator of the process (the schemas never change).
_COMPILED: dict[tuple[str, str], jsonschema.Draft4Validator] = {}
# Compiled CEL rule trees per (resource, version), likewise.
_RULES: dict[tuple[str, str], celrules.Node | None] = {}

# Pod specs in pod templates (``template.spec``: a RayCluster's head and worker groups, a
# RayJob's cluster and submitter) are most of a custom object's schema and of its
# validation, and a control plane writes the same pod spec for cluster after cluster
# (only the template's labels differ). Validating an instance against a schema is a pure
# function of the two, so a pod spec seen valid before is not walked again: its subschema
# is replaced by this keyword, which validates the instance against the original
# subschema unless that exact instance (canonical JSON) already passed. Invalid ones are
# never remembered, and their errors are the original subschema's, at the same paths.
_MEMO = "x-kubesim-valid-before"
_MEMO_SCHEMAS: list[dict[str, Any]] = []
_VALID_BEFORE: dict[tuple[int, str], None] = {}
_VALID_BEFORE_MAX = 4096


def _valid_before(validator: Any, index: int, instance: Any, schema: dict[str, Any]) -> Any:
    key = (index, json.dumps(instance, sort_keys=True, separators=(",", ":")))
    if key in _VALID_BEFORE:
        return
    errors = list(validator.descend(instance, _MEMO_SCHEMAS[index]))
    if not errors:
        if len(_VALID_BEFORE) >= _VALID_BEFORE_MAX:
            _VALID_BEFORE.pop(next(iter(_VALID_BEFORE)))  # the oldest
        _VALID_BEFORE[key] = None
    yield from errors


_MemoValidator = jsonschema.validators.extend(jsonschema.Draft4Validator, {_MEMO: _valid_before})


def _memo_pod_specs(schema: Any, key: str = "") -> Any:
    """``schema`` with each ``template.spec`` subschema behind the memo keyword."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if isinstance(schema.get("properties"), dict):
        props = {}
        for name, sub in schema["properties"].items():
            if key == "template" and name == "spec" and isinstance(sub, dict):
                _MEMO_SCHEMAS.append(sub)
                props[name] = {_MEMO: len(_MEMO_SCHEMAS) - 1}
            else:
                props[name] = _memo_pod_specs(sub, name)
        out["properties"] = props
    if isinstance(schema.get("items"), dict):
        out["items"] = _memo_pod_specs(schema["items"], key)
    if isinstance(schema.get("additionalProperties"), dict):
        out["additionalProperties"] = _memo_pod_specs(schema["additionalProperties"], key)
    return out


class Validator:
    """Caches compiled CRD schemas and validates objects written to the API."""

    def __init__(self) -> None:
        self._compiled = _COMPILED

    def _validator(self, rt: ResourceType, version: str) -> jsonschema.Draft4Validator:
        key = (rt.key, version)
        if key not in self._compiled:
            schema = _memo_pod_specs(_to_jsonschema(rt.schemas[version]))
            # metadata is checked separately; the CRD schema only says "object".
            self._compiled[key] = _MemoValidator(schema)
        return self._compiled[key]

    def prepare_custom(
        self, rt: ResourceType, version: str, obj: dict[str, Any], strict: bool
    ) -> tuple[dict[str, Any], list[str]]:
        """Prune, default and validate a custom object. Returns it and the pruned fields
        (for the ``Warning`` header); raises 400 on unknown fields when ``strict``."""
        schema = rt.schemas.get(version)
        obj = drop_nulls(obj)
        if schema is None:
            return obj, []
        unknown: list[str] = []
        _prune(obj, schema, "", unknown, root=True)
        if unknown and strict:
            msgs = ", ".join(f'unknown field "{u}"' for u in unknown)
            raise bad_request(
                f'{rt.kind} in version "{version}" cannot be handled as a '
                f"{rt.kind}: strict decoding error: {msgs}"
            )
        _apply_defaults(obj, schema)
        name = obj.get("metadata", {}).get("name", "")
        errors = sorted(
            self._validator(rt, version).iter_errors(obj),
            key=lambda e: list(map(str, e.absolute_path)),
        )
        if errors:
            raise invalid(rt.kind, rt.group, name, [_cause(e) for e in errors[:20]])
        return obj, unknown

    def check_rules(
        self, rt: ResourceType, version: str, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        """Evaluate the CRD's CEL rules on a custom object about to be stored (``old``: the
        stored object on update); 422 naming each failed rule."""
        key = (rt.key, version)
        if key not in _RULES:
            schema = rt.schemas.get(version)
            _RULES[key] = celrules.compile_schema(schema)[0] if schema else None
        node = _RULES[key]
        if node is None:
            return
        causes = celrules.check(node, obj, old)
        if causes:
            name = str(obj.get("metadata", {}).get("name", ""))
            raise invalid(rt.kind, rt.group, name, causes)


def validate_name(rt: ResourceType, name: str) -> list[Cause]:
    """Name rules: DNS-1123 subdomain (labels for namespaces and services)."""
    if not name:
        return [
            Cause(
                "metadata.name",
                "FieldValueRequired",
                "Required value: name or generateName is required",
            )
        ]
    if rt.plural in _LABEL_NAMED:
        if len(name) > 63 or not DNS1123_LABEL.match(name):
            return [
                Cause(
                    "metadata.name",
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of '
                    "lower case alphanumeric characters or '-', and must start and end "
                    "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
                    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                )
            ]
        return []
    if len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
        return [
            Cause(
                "metadata.name",
                "FieldValueInvalid",
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of '
                "lower case alphanumeric characters, '-' or '.', and must start and end "
                "with an alphanumeric character (e.g. 'example.com', regex used for "
                "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
                "[a-z0-9])?)*')",
            )
        ]
    if rt.kind == "RayCluster" and (len(name) > 53 or not DNS1035_LABEL.match(name)):
        # KubeRay refuses these in its validating webhook / operator; we refuse at write
        # time so the error reaches the caller (documented in the README).
        return [
            Cause(
                "metadata.name",
                "FieldValueInvalid",
                f'Invalid value: "{name}": RayCluster name should be no more than 53 '
                "characters and a DNS-1035 label",
            )
        ]
    return []


def _check_resources(prefix: str, res: Any, causes: list[Cause]) -> None:
    if not isinstance(res, dict):
        return
    for part in ("requests", "limits"):
        for rname, value in (res.get(part) or {}).items():
            if not quantity.is_quantity(value):
                causes.append(
                    Cause(
                        f"{prefix}.resources.{part}[{rname}]",
                        "FieldValueInvalid",
                        f"Invalid value: {_go_value(value)}: must be a quantity",
                    )
                )


# Named exception to ruff's C901 (max-complexity 12): one branch per built-in kind's required
# fields.
def validate_builtin(rt: ResourceType, obj: dict[str, Any]) -> None:  # noqa: C901
    """Light checks on built-in kinds: the fields Kubernetes requires of them."""
    causes: list[Cause] = []
    spec = obj.get("spec") or {}
    if rt.kind == "Pod":
        containers = spec.get("containers")
        if not containers:
            causes.append(Cause("spec.containers", "FieldValueRequired", "Required value"))
        for i, c in enumerate(containers or []):
            if not isinstance(c, dict):
                continue
            if not c.get("name"):
                causes.append(
                    Cause(f"spec.containers[{i}].name", "FieldValueRequired", "Required value")
                )
            if not c.get("image"):
                causes.append(
                    Cause(f"spec.containers[{i}].image", "FieldValueRequired", "Required value")
                )
            _check_resources(f"spec.containers[{i}]", c.get("resources"), causes)
    elif rt.kind == "Service":
        for i, p in enumerate(spec.get("ports") or []):
            port = p.get("port") if isinstance(p, dict) else None
            if not isinstance(port, int) or not 0 < port < 65536:
                causes.append(
                    Cause(
                        f"spec.ports[{i}].port",
                        "FieldValueInvalid",
                        f"Invalid value: {_go_value(port)}: must be between 1 and 65535, inclusive",
                    )
                )
    elif rt.kind == "ResourceQuota":
        for rname, value in (spec.get("hard") or {}).items():
            if not quantity.is_quantity(value):
                causes.append(
                    Cause(
                        f"spec.hard[{rname}]",
                        "FieldValueInvalid",
                        f"Invalid value: {_go_value(value)}: must be a quantity",
                    )
                )
    elif rt.kind in ("RoleBinding", "ClusterRoleBinding") and not obj.get("roleRef"):
        causes.append(Cause("roleRef", "FieldValueRequired", "Required value"))
    elif rt.group == "resource.k8s.io":
        causes += dra_validation.validate(rt.kind, obj)
    elif rt.kind == "PriorityClass":
        causes += priorityclasses.validate(obj)
    if causes:
        raise invalid(rt.kind, rt.group, obj.get("metadata", {}).get("name", ""), causes)


def validate_pod_update(old: dict[str, Any], new: dict[str, Any]) -> None:
    """Pod specs are immutable but for images, tolerations added, deadlines, and
    scheduling gates removed (with nodeSelector added) while the pod is gated."""
    old_gates = (old.get("spec") or {}).get("schedulingGates") or []
    new_gates = (new.get("spec") or {}).get("schedulingGates") or []
    gated = bool(old_gates) and all(g in old_gates for g in new_gates)

    def scrub(spec: dict[str, Any]) -> dict[str, Any]:
        s = json.loads(json.dumps(spec))
        for c in s.get("containers") or []:
            c.pop("image", None)
        for k in ("tolerations", "activeDeadlineSeconds", "nodeName"):
            s.pop(k, None)
        if gated:
            s.pop("schedulingGates", None)
            s.pop("nodeSelector", None)
        return s

    if scrub(old.get("spec") or {}) != scrub(new.get("spec") or {}):
        raise invalid(
            "Pod",
            "",
            old["metadata"]["name"],
            [
                Cause(
                    "spec",
                    "FieldValueForbidden",
                    "Forbidden: pod updates may not change fields other than "
                    "`spec.containers[*].image`,`spec.initContainers[*].image`,"
                    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions "
                    "to existing tolerations),`spec.terminationGracePeriodSeconds` "
                    "(allow it to be set to 1 if it was previously negative)",
                )
            ],
        )
    if (old.get("spec") or {}).get("nodeName") and (new.get("spec") or {}).get("nodeName") != old[
        "spec"
    ]["nodeName"]:
        raise invalid(
            "Pod",
            "",
            old["metadata"]["name"],
            [Cause("spec.nodeName", "FieldValueForbidden", "Forbidden: field is immutable")],
        )


def validate_metadata(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Name and label checks common to every kind."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise invalid(
            rt.kind, rt.group, "", [Cause("metadata", "FieldValueRequired", "Required value")]
        )
    causes = validate_name(rt, str(meta.get("name") or ""))
    for v in (meta.get("labels") or {}).values():
        if (
            not isinstance(v, str)
            or len(v) > 63
            or (v and not re.match(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", v))
        ):
            causes.append(
                Cause(
                    "metadata.labels",
                    "FieldValueInvalid",
                    f"Invalid value: {_go_value(v)}: a valid label must be an empty "
                    "string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character",
                )
            )
    if causes:
        raise invalid(rt.kind, rt.group, str(meta.get("name") or ""), causes)


__all__ = [
    "ApiError",
    "Validator",
    "drop_nulls",
    "validate_builtin",
    "validate_metadata",
    "validate_name",
]
