"""kubesim's evaluator of Kubernetes' JSONPath dialect and the printer columns' formatting,
on the shapes client-go's ``util/jsonpath`` and the API server's table convertor define."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.jsonpath import JSONPathError, find_results
from kubesim.printcolumns import go_float, go_text, human_duration

OBJ: dict[str, Any] = {
    "kind": "Workload",
    "metadata": {
        "name": "w",
        "labels": {"app.kubernetes.io/name": "ray", "tier": "gpu"},
    },
    "spec": {"podSets": [{"name": "head", "count": 1}, {"name": "gpu", "count": 4}]},
    "status": {
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "priority": 1},
            {"type": "Admitted", "status": "True", "priority": 2},
            {"type": "Finished", "status": "False", "priority": 3.5},
        ],
        "nothing": None,
    },
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{.metadata.name}", [["w"]]),
        ("{.status.conditions[?(@.type=='Admitted')].status}", [["True"]]),
        ('{.status.conditions[?(@.type == "Finished")].status}', [["False"]]),
        ("{.status.conditions[?(@.type!='Admitted')].type}", [["QuotaReserved", "Finished"]]),
        ("{.spec.podSets[?(@.count>=4)].name}", [["gpu"]]),
        ("{.status.conditions[?(@.priority)].type}", [["QuotaReserved", "Admitted", "Finished"]]),
        ("{.status.conditions[?(@.missing)].type}", [[]]),
        ("{.status.conditions[*].type}", [["QuotaReserved", "Admitted", "Finished"]]),
        ("{.status.conditions[0].type}", [["QuotaReserved"]]),
        ("{.status.conditions[-1].type}", [["Finished"]]),
        ("{.status.conditions[1:].type}", [["Admitted", "Finished"]]),
        ("{.status.conditions[0:3:2].type}", [["QuotaReserved", "Finished"]]),
        ("{.status.conditions[0,2].type}", [["QuotaReserved", "Finished"]]),
        ("{.spec.podSets[1]['name','count']}", [["gpu", 4]]),
        ("{.metadata.labels.app\\.kubernetes\\.io/name}", [["ray"]]),
        ("{.metadata.labels['tier']}", [["gpu"]]),
        ("{.metadata.labels.*}", [["ray", "gpu"]]),
        ("{..name}", [["w", "head", "gpu"]]),
        ("{.missing.deeper}", [[]]),
        ("{.status.nothing}", [[None]]),
        ("{.status.nothing.below}", [[]]),
        ("{.metadata.name.x}", [[]]),
        ("name={.metadata.name}", [["name="], ["w"]]),
    ],
)
def test_find_results(template: str, expected: list[list[Any]]) -> None:
    assert find_results(template, OBJ) == expected


def test_range_repeats_its_body_per_item() -> None:
    out = find_results('{range .spec.podSets[*]}{.name}{"="}{.count}{"\\n"}{end}', OBJ)
    assert out == [["head"], ["="], [1], ["\n"], ["gpu"], ["="], [4], ["\n"]]


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{.status.conditions[?(@.type=='Admitted')}", "unclosed array expect ]"),
        ("{.status.conditions[?(@.type=='Admitted']}", "unterminated filter"),
        ("{.metadata.name", "unclosed action"),
        ("{.spec.podSets[x]}", "invalid array index"),
        ("{.spec.podSets[5]}", "out of bounds"),
        ("{.metadata[0]}", "not array or slice"),
        ("{.status.conditions[?(@.priority=='1')]}", "incompatible types"),
        ("{.status.conditions[?(@.priority>1)]}", "incompatible types"),  # 3.5 is a float
        ("{.status.conditions[?(@.type=~'x')]}", "unrecognized filter operator"),
        ("{end}", "not in range"),
        ("{....name}", "multiple recursive descent"),
    ],
)
def test_errors(template: str, message: str) -> None:
    with pytest.raises(JSONPathError, match=message):
        find_results(template, OBJ)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (119, "119s"),
        (150, "2m30s"),
        (180, "3m"),
        (599, "9m59s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600 + 15 * 60, "3h15m"),
        (8 * 3600 + 59 * 60, "8h"),
        (47 * 3600, "47h"),
        (53 * 3600, "2d5h"),
        (72 * 3600, "3d"),
        (40 * 86400, "40d"),
        (2 * 365 * 86400 + 30 * 86400, "2y30d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (100.0, "100"),
        (123456.0, "123456"),
        (1234567.0, "1.234567e+06"),
        (1e8, "1e+08"),
        (0.25, "0.25"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-3.25e-7, "-3.25e-07"),
        (0.0, "0"),
    ],
)
def test_go_float(value: float, text: str) -> None:
    assert go_float(value) == text


def test_go_text() -> None:
    assert go_text("True") == "True"
    assert go_text(None) == "<no value>"
    assert go_text(True) == "true"
    assert go_text(7) == "7"
    assert go_text({"b": [1, 2], "a": "<&>"}) == '{"a":"\\u003c\\u0026\\u003e","b":[1,2]}'
