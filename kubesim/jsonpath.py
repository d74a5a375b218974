"""Kubernetes' JSONPath dialect (client-go ``util/jsonpath``), for CRD printer columns.

A template is text with ``{...}`` actions; an action is a path from the root object: fields
``.a`` (``\\.`` escapes a dot), ``['a']``, ``..`` (recursive descent), ``.*`` and ``[*]``,
indices and slices ``[i]``, ``[-1]``, ``[s:e:step]``, unions ``[a,b]``, filters
``[?(@.type=='Ready')]`` (``== != < > <= >=``, or bare existence), literals, and
``{range ...}...{end}``. :func:`find_results` returns one list of values per action, as
``FindResults`` does; missing keys give no value, as with ``AllowMissingKeys(true)``, which
is how the API server evaluates printer columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_SLICE = re.compile(r"^(-?\d*)(:-?\d*)?(:-?\d*)?$")
_DICT_KEY = re.compile(r"^'([^']*)'$")
_FILTER = re.compile(r"^([^!<>=]+)([!<>=]+)(.+?)$")
_TERMINATORS = set(".,[]$@{}") | {" ", "\t", "\r", "\n"}


class JSONPathError(ValueError):
    """A template that does not parse, or a path that cannot be evaluated on the data."""


@dataclass
class _Field:
    name: str


@dataclass
class _Slice:
    start: int | None
    stop: int | None
    step: int | None
    single: bool  # ``[i]``: the stop was derived from the start


@dataclass
class _Wildcard:
    pass


@dataclass
class _Recursive:
    pass


@dataclass
class _Literal:
    value: Any


@dataclass
class _Union:
    branches: list[list[Any]]


@dataclass
class _Filter:
    left: list[Any]
    op: str
    right: list[Any]


@dataclass
class _Range:
    path: list[Any]
    body: list[Any] = field(default_factory=list)


class _Parser:
    """Parses the inside of one action into a list of nodes (client-go's grammar)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def nodes(self) -> list[Any]:
        out: list[Any] = []
        text = self.text
        while self.pos < len(text):
            rest = text[self.pos :]
            ch = rest[0]
            if rest.startswith("[?("):
                out.append(self._filter())
            elif rest.startswith(".."):
                out.extend(self._recursive(out))
            elif ch in " \t@$":
                self.pos += 1
            elif ch == "[":
                out.extend(self._array())
            elif ch in "\"'":
                out.append(_Literal(self._quote(ch)))
            elif ch == ".":
                self.pos += 1
                out.append(self._field())
            elif ch in "+-" or ch.isdigit():
                out.append(_Literal(self._number()))
            elif ch.isalnum() or ch == "_":
                word = re.match(r"\w+", rest)
                assert word is not None
                self.pos += len(word.group())
                if word.group() in ("true", "false"):
                    out.append(_Literal(word.group() == "true"))
                else:
                    out.append(word.group())  # ``range`` / ``end``, handled by the template
            else:
                raise JSONPathError(f"unrecognized character in action: {ch!r}")
        return out

    def _recursive(self, before: list[Any]) -> list[Any]:
        if before and isinstance(before[-1], _Recursive):
            raise JSONPathError("invalid multiple recursive descent")
        self.pos += 1  # the second dot starts the field that follows
        if self.pos + 1 < len(self.text) and self.text[self.pos + 1].isalnum():
            self.pos += 1
            return [_Recursive(), self._field()]
        return [_Recursive()]

    def _field(self) -> Any:
        start = self.pos
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "\\":
                self.pos += 2
                continue
            if ch in _TERMINATORS:
                break
            self.pos += 1
        name = self.text[start : self.pos].replace("\\", "")
        return _Wildcard() if name == "*" else _Field(name)

    def _quote(self, quote: str) -> str:
        end = self.pos + 1
        while True:
            end = self.text.find(quote, end)
            if end < 0:
                raise JSONPathError("unterminated quoted string")
            if self.text[end - 1] != "\\":
                break
            end += 1
        raw = self.text[self.pos + 1 : end]
        self.pos = end + 1
        return raw.encode("latin-1", "backslashreplace").decode("unicode_escape")

    def _number(self) -> int | float:
        match = re.match(r"[+-]?[\d.eE+-]*", self.text[self.pos :])
        assert match is not None
        self.pos += len(match.group())
        try:
            return float(match.group()) if "." in match.group() else int(match.group())
        except ValueError:
            raise JSONPathError(f"cannot parse number {match.group()!r}") from None

    def _array(self) -> list[Any]:
        end = self.text.find("]", self.pos)
        if end < 0:
            raise JSONPathError("unterminated array")
        inner = self.text[self.pos + 1 : end]
        self.pos = end + 1
        if inner == "*":
            inner = ":"
        if "," in inner:
            return [_Union([_Parser(f"[{part.strip()}]").nodes() for part in inner.split(",")])]
        key = _DICT_KEY.match(inner)
        if key:
            return _Parser("." + key.group(1)).nodes()
        match = _SLICE.match(inner)
        if not match:
            raise JSONPathError(f"invalid array index {inner}")
        start, stop, step = match.groups()
        return [
            _Slice(
                int(start) if start else None,
                int(stop[1:]) if stop and stop != ":" else None,
                int(step[1:]) if step and step != ":" else None,
                single=stop is None,
            )
        ]

    def _filter(self) -> _Filter:
        self.pos += 3
        start = self.pos
        quote = ""
        while True:
            if self.pos >= len(self.text):
                raise JSONPathError("unterminated filter")
            ch = self.text[self.pos]
            self.pos += 1
            if ch in "\"'" and (not quote or ch == quote) and self.text[self.pos - 2] != "\\":
                quote = "" if quote else ch
            elif ch == ")" and not quote:
                break
        if self.text[self.pos : self.pos + 1] != "]":
            raise JSONPathError("unclosed array expect ]")
        self.pos += 1
        inner = self.text[start : self.pos - 2]
        match = _FILTER.match(inner)
        if not match:
            return _Filter(_Parser(inner).nodes(), "exists", [])
        left, op, right = match.groups()
        if op not in ("==", "!=", "<", ">", "<=", ">="):
            raise JSONPathError(f"unrecognized filter operator {op}")
        return _Filter(_Parser(left).nodes(), op, _Parser(right).nodes())


def parse(template: str) -> list[Any]:
    """The template as a list of text strings, action node lists and ranges."""
    items: list[Any] = []
    stack: list[list[Any]] = [items]
    pos = 0
    while pos < len(template):
        open_at = template.find("{", pos)
        if open_at < 0:
            stack[-1].append(template[pos:])
            break
        if open_at > pos:
            stack[-1].append(template[pos:open_at])
        close = _closing_brace(template, open_at)
        nodes = _Parser(template[open_at + 1 : close]).nodes()
        pos = close + 1
        if nodes and nodes[0] == "range":
            rng = _Range(nodes[1:])
            stack[-1].append(rng)
            stack.append(rng.body)
        elif nodes == ["end"]:
            if len(stack) == 1:
                raise JSONPathError("not in range, nothing to end")
            stack.pop()
        else:
            stack[-1].append(nodes)
    return items


def _closing_brace(template: str, open_at: int) -> int:
    quote = ""
    for i in range(open_at + 1, len(template)):
        ch = template[i]
        if ch in "\"'" and template[i - 1] != "\\" and (not quote or ch == quote):
            quote = "" if quote else ch
        elif ch == "}" and not quote:
            return i
    raise JSONPathError("unclosed action")


def find_results(template: str | list[Any], data: Any) -> list[list[Any]]:
    """One list of values per action (and per text piece) of the template, ranges unrolled."""
    items = parse(template) if isinstance(template, str) else template
    out: list[list[Any]] = []
    for item in items:
        if isinstance(item, str):
            out.append([item])
        elif isinstance(item, _Range):
            for value in _walk([data], item.path):
                out.extend(find_results(item.body, value))
        else:
            out.append(_walk([data], item))
    return out


def _walk(values: list[Any], nodes: list[Any]) -> list[Any]:
    for node in nodes:
        values = _step(values, node)
    return values


def _children(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, list | str):
        return list(value)
    return []


def _step(values: list[Any], node: Any) -> list[Any]:
    if isinstance(node, _Field):
        if not node.name:
            return values
        return [v[node.name] for v in values if isinstance(v, dict) and node.name in v]
    if isinstance(node, _Slice):
        out: list[Any] = []
        for v in values:
            if v is None:
                continue
            if not isinstance(v, list):
                raise JSONPathError(f"{type(v).__name__} is not array or slice")
            out.extend(_slice(v, node))
        return out
    if isinstance(node, _Wildcard):
        return [c for v in values if v is not None for c in _children(v)]
    if isinstance(node, _Recursive):
        return _recursive(values)
    if isinstance(node, _Literal):
        return [node.value]
    if isinstance(node, _Union):
        return [r for branch in node.branches for r in _walk(values, branch)]
    if isinstance(node, _Filter):
        return _filter(values, node)
    raise JSONPathError(f"unexpected {node!r} in a path")


def _slice(items: list[Any], node: _Slice) -> list[Any]:
    size = len(items)
    start = node.start or 0
    if start < 0:
        start += size
    stop = size if node.stop is None and not node.single else node.stop
    if node.single:
        stop = start + 1
    assert stop is not None
    if node.stop is not None and stop < 0:
        stop += size
    if stop == start:
        return []
    if not 0 <= start < size or not 0 <= stop <= size:
        raise JSONPathError(f"array index out of bounds: index {start}, length {size}")
    if start > stop:
        raise JSONPathError(f"starting index {start} is greater than ending index {stop}")
    step = node.step or 1
    if node.step is not None and node.step <= 0:
        raise JSONPathError("step must be > 0")
    return items[start:stop:step]


def _recursive(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        kids = _children(v) if isinstance(v, dict | list) else []
        if kids:
            out.append(v)
            out.extend(_recursive(kids))
    return out


def _filter(values: list[Any], node: _Filter) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if v is None:
            continue
        if not isinstance(v, list):
            raise JSONPathError(f"{type(v).__name__} is not array or slice and cannot be filtered")
        for item in v:
            lefts = _walk([item], node.left)
            if node.op == "exists":
                if lefts:
                    out.append(item)
                continue
            rights = _walk([item], node.right)
            if not lefts or not rights:
                continue
            if len(lefts) > 1 or len(rights) > 1:
                raise JSONPathError("can only compare one element at a time")
            if _compare(lefts[0], node.op, rights[0]):
                out.append(item)
    return out


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    return "other"


def _compare(left: Any, op: str, right: Any) -> bool:
    """Go text/template's ``eq``/``lt``/...: operands of one basic kind, or an error."""
    kind = _kind(left)
    if kind != _kind(right) or kind == "other":
        raise JSONPathError("incompatible types for comparison")
    if op == "==":
        return bool(left == right)
    if op == "!=":
        return bool(left != right)
    if kind == "bool":
        raise JSONPathError("invalid type for comparison")
    return bool(
        {"<": left < right, ">": left > right, "<=": left <= right, ">=": left >= right}[op]
    )
