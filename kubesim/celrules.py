"""The CRDs' CEL validation rules (``x-kubernetes-validations``), run as the API server runs them.

Rules are compiled once per CRD version with ``common-expression-language`` (cel-rust's
Python binding), whose compile and evaluation speed keeps kubesim's write throughput.
Transition rules (naming ``oldSelf``) run only where an old value correlates (or with
``optionalOldSelf``); other rules' failures on a value that did not change are ratcheted
(CRDValidationRatcheting). The Kubernetes library functions cel-rust lacks are in
:mod:`kubesim.cellib`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import cel

from kubesim.cellib import FUNCTIONS, KNOWN
from kubesim.errors import Cause


@dataclass
class Rule:
    """One compiled ``x-kubernetes-validations`` entry."""

    error: str  # why the rule does not compile ("" when it does)
    source: str
    program: Any
    message: str
    message_program: Any
    reason: str
    field_path: str
    optional_old_self: bool
    uses_old_self: bool
    functions: dict[str, Any]

    def error_string(self) -> str:
        """The rule as error messages name it: its message, else its expression."""
        return self.message.strip() or self.source.strip()


@dataclass
class Node:
    """The rules of one schema node and the children under which more rules are."""

    type: str
    rules: list[Rule] = field(default_factory=list)
    props: dict[str, Node] = field(default_factory=dict)
    items: Node | None = None
    additional: Node | None = None
    map_keys: list[str] = field(default_factory=list)
    # All plain rules of the node as one program (a list of their results), with and without
    # the transition rules: the value is converted for CEL once, not once per rule.
    batch_update: Any = None
    batch_create: Any = None
    batch_functions: dict[str, Any] = field(default_factory=dict)


def _compile_rule(spec: dict[str, Any]) -> Rule:
    source = str(spec.get("rule") or "")
    error = ""
    program = message_program = None
    names: set[str] = set()
    try:
        program = cel.compile(source)
        msg_expr = spec.get("messageExpression")
        message_program = cel.compile(msg_expr) if msg_expr else None
    except (ValueError, RuntimeError) as exc:
        error = str(exc)
    else:
        names = set(program.functions())
        if message_program is not None:
            names |= set(message_program.functions())
        unknown = sorted(n for n in names if n[0] not in "_@!" and n not in KNOWN)
        if unknown:
            error = f"undeclared reference to '{unknown[0]}'"
    return Rule(
        error=error,
        source=source,
        program=program,
        message=str(spec.get("message") or ""),
        message_program=message_program,
        reason=str(spec.get("reason") or ""),
        field_path=str(spec.get("fieldPath") or ""),
        optional_old_self=bool(spec.get("optionalOldSelf")),
        uses_old_self=program is not None and "oldSelf" in program.variables(),
        functions={n: FUNCTIONS[n] for n in names if n in FUNCTIONS},
    )


def compile_schema(schema: dict[str, Any]) -> tuple[Node | None, int]:
    """The rule tree of an ``openAPIV3Schema`` (None when it has no rules) and its rule count.
    A rule that does not compile is kept with its error, which every write then reports."""
    if not isinstance(schema, dict):
        return None, 0
    node = Node(type=str(schema.get("type") or ""))
    count = 0
    for spec in schema.get("x-kubernetes-validations") or []:
        node.rules.append(_compile_rule(spec))
        count += 1
    _compile_batches(node)
    for name, sub in (schema.get("properties") or {}).items():
        child, n = compile_schema(sub)
        if child is not None:
            node.props[name] = child
            count += n
    if isinstance(schema.get("items"), dict):
        node.items, n = compile_schema(schema["items"])
        count += n
    if isinstance(schema.get("additionalProperties"), dict):
        node.additional, n = compile_schema(schema["additionalProperties"])
        count += n
    if schema.get("x-kubernetes-list-type") == "map":
        node.map_keys = list(schema.get("x-kubernetes-list-map-keys") or [])
    if not count:
        return None, 0
    return node, count


def _batch(rules: list[Rule]) -> Any:
    if len(rules) < 2:
        return None
    # A newline ends a rule's trailing // comment before the parenthesis closes.
    try:
        return cel.compile("[" + ", ".join(f"(\n{r.source}\n)" for r in rules) + "]")
    except (ValueError, RuntimeError):
        return None


def _compile_batches(node: Node) -> None:
    plain = [r for r in node.rules if not r.optional_old_self and not r.error]
    node.batch_update = _batch(plain)
    node.batch_create = _batch([r for r in plain if not r.uses_old_self])
    for r in plain:
        node.batch_functions.update(r.functions)


def _all_pass(node: Node, value: Any, old: Any) -> bool:
    """Whether every plain rule that applies holds (one evaluation; False when unsure)."""
    program = node.batch_create if old is _MISSING else node.batch_update
    if program is None:
        return False
    activation = {"self": value, **node.batch_functions}
    if old is not _MISSING:
        activation["oldSelf"] = old
    try:
        return all(r is True for r in program.execute(activation))
    except (KeyError, TypeError, ValueError, RuntimeError):
        return False


_MISSING = object()


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _field_path(path: str, rule: Rule) -> str:
    """The error's field: the node's path, extended by the rule's ``fieldPath``."""
    extra = rule.field_path.strip()
    if not extra:
        return path or "<nil>"
    extra = extra.replace("['", ".").replace("']", "").lstrip(".")
    return _join(path, extra)


def _eval_error(exc: Exception, rule: Rule) -> str:
    """An evaluation error worded as the API server words cel-go's."""
    if isinstance(exc, KeyError):
        return f"no such key: {exc.args[0]} evaluating rule: {rule.error_string()}"
    text = str(exc)
    if text.lower().startswith("no such overload"):
        return (
            "'no such overload': call arguments did not match a supported operator, "
            f"function or macro signature for rule: {rule.error_string()}"
        )
    return f"{text} evaluating rule: {rule.error_string()}"


def _message(rule: Rule, activation: dict[str, Any]) -> str:
    if rule.message_program is not None:
        try:
            text = rule.message_program.execute(activation)
        except (KeyError, TypeError, ValueError, RuntimeError):
            text = None
        if isinstance(text, str) and text.strip() and "\n" not in text:
            return text
    if rule.message:
        return rule.message.strip()
    return f"failed rule: {rule.error_string()}"


def _cause(path: str, type_: str, rule: Rule, detail: str) -> Cause:
    where = _field_path(path, rule)
    if rule.reason == "FieldValueForbidden":
        return Cause(where, "FieldValueForbidden", f"Forbidden: {detail}")
    if rule.reason == "FieldValueRequired":
        return Cause(where, "FieldValueRequired", f"Required value: {detail}")
    if rule.reason == "FieldValueDuplicate":
        return Cause(where, "FieldValueDuplicate", f'Duplicate value: "{detail}"')
    return Cause(where, "FieldValueInvalid", f'Invalid value: "{type_}": {detail}')


def _run_rules(
    node: Node, path: str, value: Any, old: Any, unchanged: bool, causes: list[Cause]
) -> None:
    batched = _all_pass(node, value, old)
    for rule in node.rules:
        if rule.error:
            detail = f'Invalid value: "{node.type}": rule compile error: {rule.error}'
            causes.append(Cause(path or "<nil>", "FieldValueInvalid", detail))
            continue
        if batched and not rule.optional_old_self:
            continue
        if rule.uses_old_self and old is _MISSING and not rule.optional_old_self:
            continue  # a transition rule needs an old value to compare with
        activation: dict[str, Any] = {"self": value, **rule.functions}
        if rule.optional_old_self:
            activation["oldSelf"] = (
                cel.OptionalValue.none() if old is _MISSING else cel.OptionalValue.of(old)
            )
        elif rule.uses_old_self:
            activation["oldSelf"] = old
        try:
            ok = rule.program.execute(activation)
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            causes.append(Cause(path or "<nil>", "FieldValueInvalid", _invalid(node, exc, rule)))
            continue
        if ok is True:
            continue
        if not rule.uses_old_self and unchanged:
            continue  # ratcheting: a value that did not change keeps passing
        causes.append(_cause(path, node.type, rule, _message(rule, activation)))


def _invalid(node: Node, exc: Exception, rule: Rule) -> str:
    return f'Invalid value: "{node.type}": {_eval_error(exc, rule)}'


def _list_key(item: Any, keys: list[str]) -> tuple[Any, ...] | None:
    if not isinstance(item, dict):
        return None
    return tuple(item.get(k) for k in keys)


# Named exception to ruff's C901 (max-complexity 12): one branch per kind of schema child, each
# correlating the old value as the API server does.
def validate(  # noqa: C901
    node: Node,
    path: str,
    value: Any,
    old: Any,
    unchanged: bool,
    causes: list[Cause],
) -> None:
    """Evaluate the rules under ``node`` on ``value`` (``old``: the correlated old value, or
    ``_MISSING``), appending a :class:`Cause` per failed rule."""
    if value is None:
        return
    if old is not _MISSING:
        unchanged = value == old
    if node.rules:
        _run_rules(node, path, value, old, unchanged, causes)
    if isinstance(value, dict):
        old_map = old if isinstance(old, dict) else {}
        for name, child in node.props.items():
            if name in value:
                validate(
                    child,
                    _join(path, name),
                    value[name],
                    old_map.get(name, _MISSING),
                    unchanged,
                    causes,
                )
        if node.additional is not None:
            for name, sub in value.items():
                if name not in node.props:
                    validate(
                        node.additional,
                        f"{path}[{name}]",
                        sub,
                        old_map.get(name, _MISSING),
                        unchanged,
                        causes,
                    )
    elif isinstance(value, list) and node.items is not None:
        olds: dict[tuple[Any, ...], Any] = {}
        if node.map_keys and isinstance(old, list):
            for item in old:
                key = _list_key(item, node.map_keys)
                if key is not None:
                    olds[key] = item
        for i, item in enumerate(value):
            key = _list_key(item, node.map_keys) if node.map_keys else None
            prev = olds.get(key, _MISSING) if key is not None else _MISSING
            validate(node.items, f"{path}[{i}]", item, prev, unchanged, causes)


def check(node: Node | None, obj: Any, old: Any) -> list[Cause]:
    """Every failed rule of ``obj`` (``old``: the stored object on update, None on create)."""
    causes: list[Cause] = []
    if node is not None:
        validate(node, "", obj, _MISSING if old is None else old, False, causes)
    return causes


MISSING = _MISSING


def rules(node: Node | None) -> Iterator[Rule]:
    """Every rule of a rule tree."""
    if node is None:
        return
    yield from node.rules
    for child in (*node.props.values(), node.items, node.additional):
        yield from rules(child)


__all__ = ["MISSING", "Node", "Rule", "check", "compile_schema", "rules", "validate"]
