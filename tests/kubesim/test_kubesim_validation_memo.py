"""kubesim remembers pod specs it validated (kubesim/validation.py): a pod spec seen
valid is not walked again, and every answer is the one the plain CRD schema gives."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest

from kubesim import validation
from kubesim.errors import ApiError
from kubesim.resources import Registry
from tests.kubesim.kubesim_helpers import raycluster


def _errors(validator: Any, obj: dict[str, Any]) -> list[tuple[list[str], str]]:
    return sorted((list(map(str, e.absolute_path)), e.message) for e in validator.iter_errors(obj))


def _broken(base: dict[str, Any]) -> list[dict[str, Any]]:
    ports = copy.deepcopy(base)
    ports["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = "nope"
    containers = copy.deepcopy(base)
    containers["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"] = 7
    both = copy.deepcopy(containers)
    both["spec"]["workerGroupSpecs"][0]["replicas"] = "x"
    image = copy.deepcopy(base)
    image["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = 3
    return [ports, containers, both, image]


def test_a_remembered_pod_spec_gives_the_plain_schema_s_answers() -> None:
    rt = Registry.shared().by_kind("ray.io/v1", "RayCluster")
    assert rt is not None
    plain = jsonschema.Draft4Validator(validation._to_jsonschema(rt.schemas["v1"]))
    memo = validation.Validator()._validator(rt, "v1")
    base = raycluster("memo", workers=2)
    validation._VALID_BEFORE.clear()  # a cache: emptying it changes no answer
    for obj in _broken(base):  # before the valid pod specs are remembered ...
        assert _errors(memo, obj) == _errors(plain, obj) != []
    validation._VALID_BEFORE.clear()
    assert _errors(memo, base) == _errors(plain, base) == []
    remembered = len(validation._VALID_BEFORE)
    assert remembered == 2  # the head's pod spec and the workers'
    for obj in _broken(base):  # ... and after
        assert _errors(memo, obj) == _errors(plain, obj) != []
    # Another cluster of the same shape (only names and labels differ) walks nothing new.
    other = raycluster("memo-2", workers=2, labels={"gangway.dev/cluster-id": "2"})
    assert _errors(memo, other) == []
    assert len(validation._VALID_BEFORE) == remembered


def test_an_invalid_pod_spec_is_refused_every_time() -> None:
    rt = Registry.shared().by_kind("ray.io/v1", "RayCluster")
    assert rt is not None
    checker = validation.Validator()
    bad = _broken(raycluster("bad"))[0]
    for _ in range(2):
        with pytest.raises(ApiError) as refused:
            checker.prepare_custom(rt, "v1", copy.deepcopy(bad), True)
        assert refused.value.code == 422
        assert "spec.headGroupSpec.template.spec.containers[0].ports" in refused.value.message
