"""The API's only body parser: JSON, with bounds a hostile body cannot get past.

Python's ``json`` recurses once per nesting level (50,000 ``[`` raise ``RecursionError``)
and parses ``1e999999`` as ``inf``; a lone UTF-16 surrogate (``"\\ud800"``) decodes to a
string PostgreSQL cannot store. :func:`loads` refuses all three with a 400 in the
project's error format: nesting is measured before decoding, numbers must be finite and
short, surrogates are refused in keys and values. The API's bodies are flat documents a
few levels deep, so the bounds never refuse a real request.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser as DRFJSONParser
from rest_framework.parsers import get_encoding  # type: ignore[attr-defined]  # not in the stubs

MAX_DEPTH = 64
# Digits of one number; a quota of 10**30 GPUs is already refused by the serializers.
MAX_NUMBER_LENGTH = 100

# Escapes go first (so that ``\"`` cannot end a string), then strings (so that a ``[``
# inside a value does not count), then everything but brackets. Each pass is one
# linear regex substitution; none can backtrack, whatever the body.
_ESCAPE = re.compile(r"\\.", re.DOTALL)
_STRING = re.compile(r'"[^"]*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def nesting_depth(text: str, stop_above: int | None = None) -> int:
    """The deepest nesting of arrays and objects in ``text`` (0 for a scalar), counting
    no further than ``stop_above + 1``."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", _ESCAPE.sub("", text)))
    depth = deepest = 0
    for char in brackets:
        if char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop_above is not None and deepest > stop_above:
                    break
        else:
            depth -= 1
    return deepest


def _number(parse: Any) -> Any:
    def convert(literal: str) -> Any:
        if len(literal) > MAX_NUMBER_LENGTH:
            raise ValueError(f"a number longer than {MAX_NUMBER_LENGTH} characters")
        value = parse(literal)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"the number {literal[:20]} is out of range")
        return value

    return convert


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _lone_surrogate(value: Any) -> bool:
    """Whether a decoded JSON document holds a string that is not Unicode text."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_lone_surrogate(key) or _lone_surrogate(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(item) for item in value)
    return False


def loads(text: str) -> Any:
    """Decode a JSON request body, refusing deep nesting and non-finite or huge numbers."""
    if nesting_depth(text, stop_above=MAX_DEPTH) > MAX_DEPTH:
        raise ParseError(f"JSON parse error - the body nests more than {MAX_DEPTH} levels deep.")
    try:
        document = json.loads(
            text,
            parse_float=_number(float),
            parse_int=_number(int),
            parse_constant=_constant,
        )
    except RecursionError as exc:  # the depth check should make this unreachable
        raise ParseError("JSON parse error - the body nests too deeply.") from exc
    except ValueError as exc:
        raise ParseError(f"JSON parse error - {exc}") from exc
    if _lone_surrogate(document):
        raise ParseError(
            "JSON parse error - a string holds a lone UTF-16 surrogate (such as \\ud800), "
            "which is not a Unicode character."
        )
    return document


class JSONParser(DRFJSONParser):
    """DRF's JSON parser with the bounds of :func:`loads` (``DEFAULT_PARSER_CLASSES``)."""

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        encoding = get_encoding(parser_context or {})
        try:
            text = stream.read().decode(encoding) if stream is not None else ""
        except UnicodeDecodeError as exc:
            raise ParseError(f"JSON parse error - the body is not valid {encoding}.") from exc
        return loads(text)
