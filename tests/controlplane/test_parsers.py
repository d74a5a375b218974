"""The bounded JSON parser: nesting measured outside strings, numbers finite and short.

Every route refusing such bodies with a 400 is tested in tests/access/test_bodies.py.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rest_framework.exceptions import ParseError

from controlplane.api.parsers import MAX_DEPTH, JSONParser, loads, nesting_depth


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("3", 0),
        ('"[[[{"', 0),
        ("[]", 1),
        ('{"a": [1, {"b": "]]]"}], "c": {}}', 3),
        (r'["\"[", ["\\", [[]]]]', 4),
        ("[" * 50_000, 50_000),
    ],
)
def test_nesting_depth_counts_brackets_outside_strings(text: str, depth: int) -> None:
    assert nesting_depth(text) == depth


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


@given(json_values)
def test_nesting_depth_agrees_with_the_decoded_value(value: Any) -> None:
    assert nesting_depth(json.dumps(value)) == _depth(value)


def test_the_bound_is_inclusive() -> None:
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    with pytest.raises(ParseError, match=f"more than {MAX_DEPTH} levels"):
        loads("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


@pytest.mark.parametrize(
    "text",
    [
        "[" * 50_000,
        '{"a": ' * 50_000,
        '{"hours": 1e999999}',
        '{"hours": -1e400}',
        '{"hours": ' + "9" * 5000 + "}",
        '{"hours": NaN}',
        '{"hours": Infinity}',
    ],
)
def test_hostile_bodies_are_parse_errors(text: str) -> None:
    with pytest.raises(ParseError) as caught:
        JSONParser().parse(io.BytesIO(text.encode()), "application/json", {})
    # A clean message: no interpreter advice (``sys.set_int_max_str_digits``), no echo
    # of the whole body.
    assert "sys." not in str(caught.value.detail)
    assert len(str(caught.value.detail)) < 120


def test_ordinary_bodies_parse_as_before() -> None:
    body = {"flavors": [{"flavor": "h100", "gpus": 8}], "cpu": 1.5, "note": "[{"}
    assert loads(json.dumps(body)) == body


@pytest.mark.parametrize(
    "text",
    [
        r'"\ud800"',
        r'{"name": "ok\udfff"}',
        r'{"\ud800": 1}',
        r'{"a": [{"b": ["x", "\udbff"]}]}',
        r'"\ude00\ud83d"',  # a pair in the wrong order is two lone halves
    ],
)
def test_a_lone_surrogate_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="lone UTF-16 surrogate"):
        loads(text)


def test_a_surrogate_pair_is_one_character() -> None:
    assert loads(r'{"emoji": "\ud83d\ude00"}') == {"emoji": "\U0001f600"}
