"""Checking a job's runtime_env (clusters.kinds.rayjob.runtime_env); pip entries are
tested in test_pip_requirements.py and through the API in test_pip_policy.py."""

from __future__ import annotations

from clusters.kinds.rayjob.runtime_env import MAX_BYTES, validate_runtime_env


def test_nothing_is_nothing_and_a_list_is_refused() -> None:
    assert validate_runtime_env(None) == ({}, {})
    clean, faults = validate_runtime_env(["torch"])
    assert clean == {} and list(faults) == ["runtime_env"]


def test_unknown_keys_are_named_and_known_ones_kept() -> None:
    clean, faults = validate_runtime_env({"pip": ["torch==2.4.0"], "conda": {}})
    assert clean == {"pip": ["torch==2.4.0"]}
    assert "conda" in faults["runtime_env"][0]


def test_a_runtime_env_over_the_size_limit_is_refused_whole() -> None:
    clean, faults = validate_runtime_env({"env_vars": {"X": "y" * MAX_BYTES}})
    assert clean == {} and "bytes as JSON" in faults["runtime_env"][0]
