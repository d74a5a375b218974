"""The Swagger 2.0 document in gnostic's protobuf form (``openapi.v2.Document``), which client-go
asks ``/openapi/v2`` for (``application/com.github.proto-openapi.spec.v2@v1.0+protobuf``).

Field numbers are facts of gnostic's ``openapiv2/OpenAPIv2.proto``. Maps are repeated
``Named*`` pairs in document order; ``x-`` keys become ``vendor_extension`` pairs whose value is
an ``Any`` holding the value as YAML text (JSON is YAML, and that is what kubectl parses).
Only encoding is needed: kubesim never reads this form.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

Encoder = Callable[[Any], bytes]


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64 as ten bytes of two's complement
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _len(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _string(field: int, value: Any) -> bytes:
    return _len(field, str(value).encode())


def _bool(field: int, value: Any) -> bytes:
    return _varint(field << 3) + b"\x01" if value else b""


def _int(field: int, value: Any) -> bytes:
    return _varint(field << 3) + _varint(int(value))


def _double(field: int, value: Any) -> bytes:
    return _varint(field << 3 | 1) + struct.pack("<d", float(value))


def _any(value: Any) -> bytes:
    """``Any{yaml=2}``: the value written as YAML (here its JSON text)."""
    return _string(2, json.dumps(value))


def _vendor(field: int, obj: dict[str, Any]) -> bytes:
    return b"".join(
        _len(field, _string(1, k) + _len(2, _any(v))) for k, v in obj.items() if k.startswith("x-")
    )


def _named(field: int, items: dict[str, Any], encode: Encoder) -> bytes:
    return b"".join(_len(field, _string(1, k) + _len(2, encode(v))) for k, v in items.items())


# JSON key -> (field number, kind) per message; kind is a scalar name or a message encoder.
_SCALARS: dict[str, Callable[[int, Any], bytes]] = {
    "string": _string,
    "bool": _bool,
    "int": _int,
    "double": _double,
}


def _message(obj: dict[str, Any], table: dict[str, tuple[int, Any]], vendor: int) -> bytes:
    out = bytearray()
    for key, value in obj.items():
        spec = table.get(key)
        if spec is None or value is None:
            continue
        field, kind = spec
        if kind == "strings":
            out += b"".join(_string(field, v) for v in value)
        elif kind == "any":
            out += _len(field, _any(value))
        elif kind == "anys":
            out += b"".join(_len(field, _any(v)) for v in value)
        elif isinstance(kind, str):
            out += _SCALARS[kind](field, value)
        else:
            out += kind(field, value)
    if vendor:
        out += _vendor(vendor, obj)
    return bytes(out)


def _schema(schema: dict[str, Any]) -> bytes:
    return _message(schema, _SCHEMA, 31)


def _schemas(field: int, value: Any) -> bytes:
    return b"".join(_len(field, _schema(s)) for s in value)


def _additional(field: int, value: Any) -> bytes:
    if isinstance(value, bool):
        return _len(field, _bool(2, value) or _varint(2 << 3) + b"\x00")
    return _len(field, _len(1, _schema(value)))


def _type(field: int, value: Any) -> bytes:
    values = [value] if isinstance(value, str) else list(value)
    return _len(field, b"".join(_string(1, v) for v in values))


def _items(field: int, value: Any) -> bytes:
    return _len(field, _schemas(1, value if isinstance(value, list) else [value]))


def _properties(field: int, value: Any) -> bytes:
    return _len(field, _named(1, value, _schema))


def _docs(field: int, value: Any) -> bytes:
    return _len(field, _message(value, {"description": (1, "string"), "url": (2, "string")}, 3))


_SCHEMA: dict[str, tuple[int, Any]] = {
    "$ref": (1, "string"),
    "format": (2, "string"),
    "title": (3, "string"),
    "description": (4, "string"),
    "default": (5, "any"),
    "multipleOf": (6, "double"),
    "maximum": (7, "double"),
    "exclusiveMaximum": (8, "bool"),
    "minimum": (9, "double"),
    "exclusiveMinimum": (10, "bool"),
    "maxLength": (11, "int"),
    "minLength": (12, "int"),
    "pattern": (13, "string"),
    "maxItems": (14, "int"),
    "minItems": (15, "int"),
    "uniqueItems": (16, "bool"),
    "maxProperties": (17, "int"),
    "minProperties": (18, "int"),
    "required": (19, "strings"),
    "enum": (20, "anys"),
    "additionalProperties": (21, _additional),
    "type": (22, _type),
    "items": (23, _items),
    "allOf": (24, _schemas),
    "properties": (25, _properties),
    "discriminator": (26, "string"),
    "readOnly": (27, "bool"),
    "externalDocs": (29, _docs),
    "example": (30, "any"),
}

# Query, path, header and formData parameters: the fields they share, by location (the
# numbers shift by one where a location has ``allowEmptyValue``).
_WITH_EMPTY = {"required": 1, "in": 2, "description": 3, "name": 4, "allowEmptyValue": 5}
_NO_EMPTY = {"required": 1, "in": 2, "description": 3, "name": 4}


def _sub_schema(first: dict[str, int]) -> dict[str, tuple[int, Any]]:
    base = len(first) + 1
    table: dict[str, tuple[int, Any]] = {
        k: (n, "bool" if k in ("required", "allowEmptyValue") else "string")
        for k, n in first.items()
    }
    rest = [
        ("type", "string"),
        ("format", "string"),
        ("items", None),
        ("collectionFormat", "string"),
        ("default", "any"),
        ("maximum", "double"),
        ("exclusiveMaximum", "bool"),
        ("minimum", "double"),
        ("exclusiveMinimum", "bool"),
        ("maxLength", "int"),
        ("minLength", "int"),
        ("pattern", "string"),
        ("maxItems", "int"),
        ("minItems", "int"),
        ("uniqueItems", "bool"),
        ("enum", "anys"),
        ("multipleOf", "double"),
    ]
    for offset, (key, kind) in enumerate(rest):
        if kind is not None:
            table[key] = (base + offset, kind)
    return table


_IN = {
    "header": (1, _sub_schema(_NO_EMPTY), 22),
    "formData": (2, _sub_schema(_WITH_EMPTY), 23),
    "query": (3, _sub_schema(_WITH_EMPTY), 23),
    "path": (4, _sub_schema(_NO_EMPTY), 22),
}
_BODY = {
    "description": (1, "string"),
    "name": (2, "string"),
    "in": (3, "string"),
    "required": (4, "bool"),
    "schema": (5, lambda f, v: _len(f, _schema(v))),
}


def _parameter(param: dict[str, Any]) -> bytes:
    """``ParametersItem``: a ``$ref``, a body parameter, or a non-body one by location."""
    if "$ref" in param:
        return _len(2, _string(1, param["$ref"]))
    if param.get("in") == "body":
        return _len(1, _len(1, _message(param, _BODY, 6)))
    field, table, vendor = _IN[param.get("in", "query")]
    return _len(1, _len(2, _len(field, _message(param, table, vendor))))


def _responses(field: int, value: Any) -> bytes:
    def response(r: dict[str, Any]) -> bytes:
        if "$ref" in r:
            return _len(2, _string(1, r["$ref"]))
        table = {
            "description": (1, "string"),
            "schema": (2, lambda f, v: _len(f, _len(1, _schema(v)))),
        }
        return _len(1, _message(r, table, 5))

    return _len(field, _named(1, {k: v for k, v in value.items() if k[:2] != "x-"}, response))


_OPERATION: dict[str, tuple[int, Any]] = {
    "tags": (1, "strings"),
    "summary": (2, "string"),
    "description": (3, "string"),
    "operationId": (5, "string"),
    "produces": (6, "strings"),
    "consumes": (7, "strings"),
    "parameters": (8, lambda f, v: b"".join(_len(f, _parameter(p)) for p in v)),
    "responses": (9, _responses),
    "schemes": (10, "strings"),
    "deprecated": (11, "bool"),
}
_PATH_ITEM: dict[str, tuple[int, Any]] = {
    "$ref": (1, "string"),
    **{
        verb: (n, lambda f, v: _len(f, _message(v, _OPERATION, 13)))
        for verb, n in (
            ("get", 2),
            ("put", 3),
            ("post", 4),
            ("delete", 5),
            ("options", 6),
            ("head", 7),
            ("patch", 8),
        )
    },
    "parameters": (9, lambda f, v: b"".join(_len(f, _parameter(p)) for p in v)),
}


def encode_document(doc: dict[str, Any]) -> bytes:
    """The protobuf bytes of a Swagger 2.0 document (``openapi.v2.Document``)."""
    table: dict[str, tuple[int, Any]] = {
        "swagger": (1, "string"),
        "info": (
            2,
            lambda f, v: _len(
                f, _message(v, {"title": (1, "string"), "version": (2, "string")}, 7)
            ),
        ),
        "host": (3, "string"),
        "basePath": (4, "string"),
        "schemes": (5, "strings"),
        "consumes": (6, "strings"),
        "produces": (7, "strings"),
        "paths": (
            8,
            lambda f, v: _len(
                f,
                _vendor(1, v)
                + _named(2, {k: p for k, p in v.items() if k[:2] != "x-"}, _path_item),
            ),
        ),
        "definitions": (9, lambda f, v: _len(f, _named(1, v, _schema))),
    }
    return _message(doc, table, 16)


def _path_item(item: dict[str, Any]) -> bytes:
    return _message(item, _PATH_ITEM, 10)
