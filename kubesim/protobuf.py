"""Kubernetes protobuf request bodies, decoded into the JSON form of the object they carry.

kubectl sends its imperative creates of built-in kinds as
``application/vnd.kubernetes.protobuf``: ``k8s\\0`` and a ``runtime.Unknown`` message.
:func:`decode` turns it into the dict a JSON client would have sent, so validation,
defaults and storage stay on the one JSON path. The messages are described in
``protoschema.py``; a field the tables do not know is refused unless it is empty (Go
writes every non-pointer field), so nothing a client sent is silently lost.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from kubesim.protoschema import ANY_VERSION_KINDS, KINDS, MESSAGES

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

# Wire types.
VARINT, I64, LEN, I32 = 0, 1, 2, 5
_WIRE_OF = {"int": VARINT, "bool": VARINT, "double": I64}  # everything else is LEN


class DecodeError(ValueError):
    """The body is not well-formed protobuf, or does not fit the message it claims to be."""


class Unsupported(Exception):
    """The body is protobuf kubesim cannot read: a kind it has no description of, or a
    nested encoding (``contentEncoding``/``contentType`` of the envelope) other than plain."""


# Named exception to ruff's C901 (max-complexity 12): one branch per protobuf wire type.
def decode(body: bytes) -> dict[str, Any]:  # noqa: C901
    """The JSON form of the object in a ``k8s\\0``-prefixed protobuf body.

    Raises :class:`DecodeError` for a malformed body and :class:`Unsupported` for a kind or a
    nested encoding kubesim cannot read.
    """
    if not body.startswith(MAGIC):
        raise DecodeError("the body does not start with the Kubernetes protobuf prefix k8s\\x00")
    api_version = kind = encoding = content_type = ""
    raw = b""
    for number, wire, value in fields(body[len(MAGIC) :]):
        if number == 1:
            for n, w, v in fields(_length_delimited(wire, value, "typeMeta")):
                if n == 1:
                    api_version = _string(w, v, "apiVersion")
                elif n == 2:
                    kind = _string(w, v, "kind")
        elif number == 2:
            raw = _length_delimited(wire, value, "raw")
        elif number == 3:
            encoding = _string(wire, value, "contentEncoding")
        elif number == 4:
            content_type = _string(wire, value, "contentType")
    if not kind:
        raise DecodeError("the envelope has no typeMeta.kind")
    if encoding or content_type not in ("", MEDIA_TYPE):
        raise Unsupported(
            f'the protobuf envelope declares contentType "{content_type}" and contentEncoding '
            f'"{encoding}"; kubesim reads only plain protobuf objects'
        )
    if kind not in ANY_VERSION_KINDS and kind not in KINDS.get(api_version, ()):
        raise Unsupported(
            f'kubesim cannot decode "{api_version}, Kind={kind}" from protobuf; '
            "send it as application/json"
        )
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    obj.update(decode_message(raw, kind))
    return obj


def decode_message(buf: bytes, name: str) -> dict[str, Any]:
    """The JSON form of one message of ``protoschema.MESSAGES``, without the envelope."""
    return _message(buf, name, "")


# -- the wire format -------------------------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while pos < len(buf):
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise DecodeError("a varint is longer than 10 bytes")
    raise DecodeError("the body ends inside a varint")


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Each field of one message as (number, wire type, value): an int for varints, the
    bytes for the other wire types."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise DecodeError("field number 0 is not valid protobuf")
        value: int | bytes
        if wire == VARINT:
            value, pos = _varint(buf, pos)
        else:
            if wire == LEN:
                size, pos = _varint(buf, pos)
            elif wire in (I64, I32):
                size = 8 if wire == I64 else 4
            else:
                raise DecodeError(f"wire type {wire} (field {number}) is not supported")
            if pos + size > len(buf):
                raise DecodeError(f"field {number} runs past the end of its message")
            value, pos = buf[pos : pos + size], pos + size
        yield number, wire, value


def _length_delimited(wire: int, value: int | bytes, where: str) -> bytes:
    if wire != LEN or not isinstance(value, bytes):
        raise DecodeError(f"{where}: expected a length-delimited field")
    return value


def _string(wire: int, value: int | bytes, where: str) -> str:
    try:
        return _length_delimited(wire, value, where).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"{where}: not valid UTF-8") from exc


def _signed(value: int) -> int:
    # int32 and int64 are both sent as the 64-bit two's complement of the value.
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


# -- messages --------------------------------------------------------------------------------


def _message(buf: bytes, name: str, path: str) -> dict[str, Any]:
    """Decode one message into its JSON fields (``path`` names it in error messages)."""
    schema = MESSAGES[name]
    out: dict[str, Any] = {}
    for number, wire, value in fields(buf):
        field = schema.get(number)
        if field is None:
            if value in (0, b""):
                continue  # a field newer than kubesim's tables, left at its zero value
            raise DecodeError(
                f"{path or name}: field {number} of {name} is not known to kubesim "
                "(send the object as application/json)"
            )
        where = f"{path}.{field.name}" if path else field.name
        if field.shape == "list":
            items = out.setdefault(field.name, [])
            items.extend(_repeated(field.type, wire, value, f"{where}[{len(items)}]"))
        elif field.shape == "map":
            key, item = _map_entry(field.type, wire, value, where)
            out.setdefault(field.name, {})[key] = item
        elif field.name == "*":
            out.update(_value(field.type, wire, value, path))
        else:
            decoded = _value(field.type, wire, value, where)
            if decoded is None or (not field.keep_zero and decoded in ("", 0)):
                out.pop(field.name, None)  # the last occurrence of a field wins
            else:
                out[field.name] = decoded
    convert = _CONVERT.get(name)
    return convert(out) if convert else out


def _value(typ: str, wire: int, value: int | bytes, where: str) -> Any:
    """One value of a scalar or message type."""
    expected = _WIRE_OF.get(typ, LEN)
    if wire != expected:
        raise DecodeError(f"{where}: wire type {wire} where {typ} needs wire type {expected}")
    if isinstance(value, int):
        return bool(value) if typ == "bool" else _signed(value)
    if typ == "string":
        return _string(wire, value, where)
    if typ == "bytes":
        return base64.b64encode(value).decode("ascii")
    if typ == "double":
        return struct.unpack("<d", value)[0]
    return _message(value, typ, where)


def _repeated(typ: str, wire: int, value: int | bytes, where: str) -> list[Any]:
    """The items of one occurrence of a repeated field; numbers may come packed."""
    if wire == LEN and typ in _WIRE_OF and isinstance(value, bytes):
        if typ == "double":
            if len(value) % 8:
                raise DecodeError(f"{where}: packed doubles of {len(value)} bytes")
            return [v for (v,) in struct.iter_unpack("<d", value)]
        items, pos = [], 0
        while pos < len(value):
            item, pos = _varint(value, pos)
            items.append(bool(item) if typ == "bool" else _signed(item))
        return items
    return [_value(typ, wire, value, where)]


def _map_entry(typ: str, wire: int, value: int | bytes, where: str) -> tuple[str, Any]:
    """A ``map<string, typ>`` entry: a message with key=1 and value=2."""
    entry = _length_delimited(wire, value, where)
    key, item = "", None
    for number, w, v in fields(entry):
        if number == 1:
            key = _string(w, v, f"{where} key")
        elif number == 2:
            item = _value(typ, w, v, f"{where}[{key}]")
        else:
            raise DecodeError(f"{where}: a map entry has a field {number}")
    if item is None:  # a value left at its zero value is not written
        item = _ZERO[typ] if typ in _ZERO else _message(b"", typ, where)
    return key, item


_ZERO: dict[str, Any] = {"string": "", "bytes": "", "int": 0, "bool": False, "double": 0.0}


# -- messages whose JSON form is not an object -----------------------------------------------


def _time(micro: bool) -> Callable[[dict[str, Any]], str | None]:
    def convert(msg: dict[str, Any]) -> str | None:
        seconds, nanos = msg.get("seconds", 0), msg.get("nanos", 0)
        if not seconds and not nanos:
            return None  # the zero time is null in JSON
        try:
            moment = datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
        except (OverflowError, OSError, ValueError) as exc:
            raise DecodeError(f"a timestamp of {seconds} seconds is out of range") from exc
        return f"{moment}.{nanos // 1000:06d}Z" if micro else f"{moment}Z"

    return convert


def _int_or_string(msg: dict[str, Any]) -> int | str:
    return str(msg.get("strVal", "")) if msg.get("type") == 1 else int(msg.get("intVal", 0))


def _fields_v1(msg: dict[str, Any]) -> Any:
    raw = base64.b64decode(msg.get("Raw", ""))
    try:
        return json.loads(raw) if raw else {}
    except ValueError as exc:
        raise DecodeError("managedFields: fieldsV1 is not JSON") from exc


_CONVERT: dict[str, Callable[[dict[str, Any]], Any]] = {
    "Time": _time(micro=False),
    "MicroTime": _time(micro=True),
    "Quantity": lambda msg: msg.get("string") or "0",
    "IntOrString": _int_or_string,
    "FieldsV1": _fields_v1,
}
