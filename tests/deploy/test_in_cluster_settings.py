"""The settings a deployment relies on, read in a fresh process as a pod would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def kubeconfig_setting(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "TMPDIR"}}
    base.update(
        {"DATABASE_URL": "sqlite:///:memory:", "DJANGO_SETTINGS_MODULE": "controlplane.settings"}
    )
    base.update(env)
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(repr(settings.KUBECONFIG))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_empty_kubeconfig_means_in_cluster_credentials() -> None:
    # deploy/base sets KUBECONFIG= so that the gateway loads the pod's service account.
    assert kubeconfig_setting(KUBECONFIG="") == "''"


def test_unset_kubeconfig_is_the_development_file_and_a_path_is_kept() -> None:
    assert kubeconfig_setting().endswith("kubeconfig'")
    assert kubeconfig_setting(KUBECONFIG="/etc/kube/config") == "'/etc/kube/config'"
