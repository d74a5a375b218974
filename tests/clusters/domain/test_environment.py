"""The one set of rules for environment variables (clusters/domain/environment.py): names,
sizes, and the names refused because they would defeat the GPU rules or break Ray."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusters.domain import environment
from clusters.domain.environment import (
    MAX_TOTAL_BYTES,
    MAX_VALUE_BYTES,
    MAX_VARIABLES,
    validate_env,
)
from clusters.kinds.rayjob.runtime_env import validate_runtime_env

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,30}", fullmatch=True)
values = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40
)


def test_good_variables_come_back_sorted() -> None:
    clean, faults = validate_env({"WANDB_MODE": "offline", "HF_HOME": "/tmp/hf", "X": ""})
    assert faults == []
    assert list(clean) == ["HF_HOME", "WANDB_MODE", "X"]


@pytest.mark.parametrize("empty", [None, "", {}])
def test_nothing_is_nothing(empty: object) -> None:
    assert validate_env(empty) == ({}, [])


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("NVIDIA_VISIBLE_DEVICES", "GPUs"),
        ("nvidia_driver_capabilities", "GPUs"),
        ("CUDA_VISIBLE_DEVICES", "GPUs"),
        ("CUDA_DEVICE_ORDER", "GPUs"),
        ("HIP_VISIBLE_DEVICES", "accelerators"),
        ("ROCR_VISIBLE_DEVICES", "accelerators"),
        ("GPU_DEVICE_ORDINAL", "accelerators"),
        ("LD_PRELOAD", "libraries"),
        ("LD_LIBRARY_PATH", "libraries"),
        ("RAY_ADDRESS", "Ray"),
        ("KUBERAY_GEN_RAY_START_CMD", "Ray"),
        ("KUBERNETES_SERVICE_HOST", "Kubernetes"),
        ("MY_POD_IP", "Kubernetes"),
        ("PATH", "ray"),
        ("CONTAINERS_CONF_OVERRIDE", "container runtime"),
        ("PIP_INDEX_URL", "package index"),
        ("pip_extra_index_url", "package index"),
        ("PIP_TRUSTED_HOST", "package index"),
        ("PIP_CONFIG_FILE", "pip"),
    ],
)
def test_refused_names_say_which_and_why(name: str, words: str) -> None:
    clean, faults = validate_env({name: "x"})
    assert clean == {}
    (fault,) = faults
    assert fault.startswith(name) and words in fault


@pytest.mark.parametrize("name", ["RAY_DEDUP_LOGS", "OMP_NUM_THREADS", "HF_TOKEN", "_PRIVATE"])
def test_harmless_names_pass(name: str) -> None:
    assert validate_env({name: "1"}) == ({name: "1"}, [])


def test_every_fault_is_reported_at_once() -> None:
    _, faults = validate_env(
        {
            "1BAD": "x",
            "CUDA_VISIBLE_DEVICES": "0",
            "NUMBER": 3,
            "BIG": "x" * (MAX_VALUE_BYTES + 1),
            "NUL": "a\x00b",
        }
    )
    assert len(faults) == 5
    joined = " ".join(faults)
    for name in ("'1BAD'", "CUDA_VISIBLE_DEVICES", "NUMBER", "BIG", "NUL"):
        assert name in joined


def test_counts_and_total_size_are_capped() -> None:
    many = {f"V{i}": "x" for i in range(MAX_VARIABLES + 1)}
    assert any(f"at most {MAX_VARIABLES}" in f for f in validate_env(many)[1])
    heavy = {f"V{i}": "x" * MAX_VALUE_BYTES for i in range(MAX_TOTAL_BYTES // MAX_VALUE_BYTES)}
    assert any("in all" in f for f in validate_env(heavy)[1])


def test_not_an_object_is_refused() -> None:
    assert validate_env(["A=1"])[1] and validate_env("A=1")[1]


@given(st.dictionaries(names, values, max_size=10))
def test_a_name_passes_exactly_when_no_rule_refuses_it(env: dict[str, str]) -> None:
    clean, faults = validate_env(env)
    refused = [name for name in env if environment.refusal(name)]
    assert bool(faults) == bool(refused)
    if not refused:
        assert clean == dict(sorted(env.items()))


@given(names)
def test_runtime_env_refuses_the_same_names(name: str) -> None:
    """A job's runtime_env.env_vars and a request's env share the list of refused names."""
    _, errors = validate_runtime_env({"env_vars": {name: "1"}})
    assert bool(errors) == bool(environment.refusal(name))
