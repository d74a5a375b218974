"""kubesim's CEL rule engine on rule features that no shipped CRD uses yet (so the corpus
cannot reach them through a client): ``messageExpression``, ``reason``, ``fieldPath``,
``optionalOldSelf``, ratcheting, list-map correlation and the Kubernetes library functions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesim import celrules

CRD_DIR = Path(__file__).parents[2] / "kubesim" / "crds"


def _causes(schema: dict[str, Any], obj: Any, old: Any = None) -> list[tuple[str, str, str]]:
    node, _ = celrules.compile_schema(schema)
    return [(c.field, c.reason, c.message) for c in celrules.check(node, obj, old)]


def _spec(rules: list[dict[str, Any]], **props: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": rules,
                "properties": props or {"a": {"type": "integer"}, "b": {"type": "integer"}},
            }
        },
    }


def test_message_expression_reason_and_field_path() -> None:
    """The message comes from messageExpression, the cause's reason from ``reason`` and its
    field from ``fieldPath``; with neither, ``failed rule: <rule>``."""
    schema = _spec(
        [
            {
                "rule": "self.a < self.b",
                "messageExpression": "'a is ' + string(self.a)",
                "reason": "FieldValueForbidden",
                "fieldPath": ".a",
            },
            {"rule": "self.a != 7"},
        ]
    )
    assert _causes(schema, {"spec": {"a": 7, "b": 1}}) == [
        ("spec.a", "FieldValueForbidden", "Forbidden: a is 7"),
        ("spec", "FieldValueInvalid", 'Invalid value: "object": failed rule: self.a != 7'),
    ]


def test_transition_rules_need_an_old_value_unless_optional() -> None:
    """On create a rule naming oldSelf is skipped; with optionalOldSelf it runs, oldSelf
    being an empty optional."""
    rules = [
        {"rule": "self.a == oldSelf.a", "message": "a is immutable"},
        {
            "rule": "!oldSelf.hasValue() || self.b >= oldSelf.value().b",
            "message": "b may only grow",
            "optionalOldSelf": True,
        },
        {
            "rule": "oldSelf.hasValue() || self.b > 0",
            "message": "b starts positive",
            "optionalOldSelf": True,
        },
    ]
    schema = _spec(rules)
    assert _causes(schema, {"spec": {"a": 1, "b": 1}}) == []
    assert [m for _, _, m in _causes(schema, {"spec": {"a": 1, "b": 0}})] == [
        'Invalid value: "object": b starts positive'
    ]
    old = {"spec": {"a": 1, "b": 5}}
    assert [m for _, _, m in _causes(schema, {"spec": {"a": 2, "b": 4}}, old)] == [
        'Invalid value: "object": a is immutable',
        'Invalid value: "object": b may only grow',
    ]


def test_unchanged_values_are_ratcheted() -> None:
    """A stored value that breaks a (new) rule may be written again unchanged."""
    schema = _spec([{"rule": "self.a < 10", "message": "a too big"}])
    stored = {"spec": {"a": 20}, "status": {"x": 1}}
    assert _causes(schema, {"spec": {"a": 20}, "status": {"x": 2}}, stored) == []
    assert _causes(schema, {"spec": {"a": 21}}, stored)[0][2].endswith("a too big")


def test_list_map_items_correlate_by_key() -> None:
    """Items of a map-list meet their old selves by key; other lists' items have none."""
    item = {
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.v == oldSelf.v", "message": "v fixed"}],
        "properties": {"k": {"type": "string"}, "v": {"type": "integer"}},
    }
    schema = _spec(
        [],
        m={
            "type": "array",
            "items": item,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["k"],
        },
        s={"type": "array", "items": item},
    )
    old = {"spec": {"m": [{"k": "x", "v": 1}], "s": [{"k": "x", "v": 1}]}}
    new = {"spec": {"m": [{"k": "y", "v": 3}, {"k": "x", "v": 2}], "s": [{"k": "x", "v": 2}]}}
    assert [f for f, _, _ in _causes(schema, new, old)] == ["spec.m[1]"]


def test_evaluation_errors_are_worded_as_the_api_server_words_them() -> None:
    """A missing field is ``no such key``, naming the rule by its message."""
    schema = _spec([{"rule": "self.c > 0", "message": "c positive"}])
    assert _causes(schema, {"spec": {"a": 1}}) == [
        (
            "spec",
            "FieldValueInvalid",
            'Invalid value: "object": no such key: c evaluating rule: c positive',
        )
    ]


@pytest.mark.parametrize(
    "rule",
    [
        "[1, 2, 2].isSorted() && ![2, 1].isSorted()",
        "[1, 2, 3].sum() == 6 && [3, 1].min() == 1 && [3, 1].max() == 3",
        "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2",
        "'Ab'.lowerAscii() == 'ab' && 'ab'.upperAscii() == 'AB' && ' x '.trim() == 'x'",
        "'a,b'.split(',') == ['a', 'b'] && ['a', 'b'].join('-') == 'a-b'",
        "'hello'.substring(1, 3) == 'el' && 'hello'.charAt(1) == 'e'",
        "'hello'.replace('l', 'L') == 'heLLo' && 'hello'.indexOf('l') == 2",
        "'a1b22'.find('[0-9]+') == '1' && 'a1b22'.findAll('[0-9]+') == ['1', '22']",
        "'abc'.matches('^a') && self.exists_one(x, x == 1) && self.all(x, x > 0)",
    ],
)
def test_kubernetes_library_functions(rule: str) -> None:
    """Each library function cel-rust lacks behaves as Kubernetes' does."""
    schema = {
        "type": "array",
        "items": {"type": "integer"},
        "x-kubernetes-validations": [{"rule": rule}],
    }
    node, count = celrules.compile_schema(schema)
    assert count == 1
    assert celrules.check(node, [1, 2], None) == []


def test_a_rule_that_does_not_compile_is_reported_on_every_write() -> None:
    """No rule is skipped silently: one that does not parse, or calls a function kubesim
    does not have, refuses the write as kube-apiserver does with a rule compile error."""
    for rule, error in (
        ("self.(", "rule compile error: "),
        ("url(self).getHost() == 'x'", "undeclared reference to 'getHost'"),
    ):
        schema = {"type": "object", "x-kubernetes-validations": [{"rule": rule}]}
        node, count = celrules.compile_schema(schema)
        assert count == 1
        [cause] = celrules.check(node, {}, None)
        assert cause.field == "<nil>" and error in cause.message


def test_every_rule_of_the_served_crds_compiles() -> None:
    """105 rules (the RayService CRD brings five, the MultiKueue CRDs two, the Topology
    CRDs nine: three in each of Kueue's two versions and in KAI's), none unsupported."""
    total, failing = 0, []
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            node, _ = celrules.compile_schema(version["schema"]["openAPIV3Schema"])
            for rule in celrules.rules(node):
                total += 1
                if rule.error:
                    failing.append((path.name, rule.source, rule.error))
    assert failing == []
    assert total == 105
