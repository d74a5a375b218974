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


def test_working_dir_and_modules_take_only_uris_ray_can_fetch() -> None:
    """Ray 2.49's remote protocols are https, s3, gs and azure (plus gcs for a package
    its GCS holds): plain http, az:// or abfss:// would fail the job on the cluster."""
    for uri in ("https://h/code.zip", "s3://b/code.zip", "gs://b/m.zip", "azure://c/code.zip"):
        clean, faults = validate_runtime_env({"working_dir": uri, "py_modules": [uri]})
        assert faults == {} and clean["working_dir"] == uri, uri
    assert validate_runtime_env({"working_dir": "gcs://_ray_pkg_0123.zip"})[1] == {}
    for uri in ("http://h/code.zip", "az://c/code.zip", "abfss://c@a/code.zip", "./code"):
        _, faults = validate_runtime_env({"working_dir": uri})
        assert "https://, s3://, gs://, azure://, gcs://" in faults["runtime_env.working_dir"][0]
    _, faults = validate_runtime_env({"working_dir": "https://h/code.tar.gz"})
    assert faults["runtime_env.working_dir"] == [
        "An https URI must point to a .zip archive, as Ray requires."
    ]
