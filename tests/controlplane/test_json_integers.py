"""Integers in request bodies are JSON integers: ``1.0``, ``"1"`` and ``true`` are 400s.

DRF's ``IntegerField`` takes the first two, where the schema says ``type: integer``
(``controlplane/api/serializers.py::JsonIntegerField``). The cluster and job bodies are
covered by the hostile requests of ``tests/reliability/test_abuse.py``; these cover the
admin bodies (quota, policy, flavors), including a model serializer's own columns.
"""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.api.serializers import JsonIntegerField, JsonStringField
from tenants.api.serializers import (
    CohortSetSerializer,
    FlavorCreateSerializer,
    PolicySerializer,
    QuotaSetSerializer,
)

NOT_INTEGERS = [1.0, 8.5, "8", "", True, False, [8], {"n": 8}]


@pytest.mark.parametrize("value", NOT_INTEGERS, ids=repr)
def test_a_json_integer_field_takes_integers_only(value: Any) -> None:
    field = JsonIntegerField(min_value=0)
    with pytest.raises(Exception) as raised:
        field.run_validation(value)
    assert "Must be a whole number (a JSON integer)." in str(raised.value)


def test_a_json_integer_field_keeps_its_bounds() -> None:
    field = JsonIntegerField(min_value=0, max_value=10)
    assert field.run_validation(7) == 7
    with pytest.raises(Exception, match="less than or equal to 10"):
        field.run_validation(11)


@pytest.mark.parametrize("value", [8.0, "8", True], ids=repr)
def test_quota_gpus_cpu_and_memory_refuse_what_is_not_an_integer(value: Any) -> None:
    good = {"flavors": [{"flavor": "h100", "gpus": 8}], "cpu": 64, "memory_gib": 512}
    assert QuotaSetSerializer(data=good).is_valid(), "the valid body must pass"
    for body in (
        {**good, "flavors": [{"flavor": "h100", "gpus": value}]},
        {**good, "cpu": value},
        {**good, "memory_gib": value},
    ):
        serializer = QuotaSetSerializer(data=body)
        assert not serializer.is_valid()


def test_policy_numbers_refuse_a_zero_fraction() -> None:
    assert PolicySerializer(data={"dev_ttl_hours": 8}).is_valid()
    serializer = PolicySerializer(data={"dev_ttl_hours": 8.0})
    assert not serializer.is_valid()
    assert "dev_ttl_hours" in serializer.errors


def test_a_strict_model_serializer_maps_integer_columns_to_json_integers() -> None:
    integer_fields = [
        name
        for name, field in FlavorCreateSerializer().fields.items()
        if isinstance(field, JsonIntegerField)
    ]
    assert integer_fields, "a flavor has integer columns (GPUs per node, nodes)"
    data = {name: 8.0 for name in integer_fields}
    serializer = FlavorCreateSerializer(data=data)
    assert not serializer.is_valid()
    for name in integer_fields:
        assert name in serializer.errors, name


@pytest.mark.parametrize("value", [5.98e113, 7, True, ["x"], {"x": 1}], ids=repr)
def test_a_model_serializers_text_columns_take_json_strings_only(value: Any) -> None:
    # The schema fuzzer's find: a cohort's description given as a number was kept as its
    # text ("5.980184939800577e+113").
    assert CohortSetSerializer(data={"description": "GPU research"}).is_valid()
    serializer = CohortSetSerializer(data={"description": value})
    assert not serializer.is_valid()
    assert serializer.errors["description"] == ["Must be a string (a JSON string)."]
    assert isinstance(CohortSetSerializer().fields["description"], JsonStringField)
