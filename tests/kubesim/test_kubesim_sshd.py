"""The SSH server kubesim runs for a pod that asks for one (a port named ``ssh`` and the
``ssh-authorized-keys`` Secret volume), driven by OpenSSH's own ``ssh``: it accepts the
Secret's keys only and runs commands in the process's folder; it ends with the pod."""

from __future__ import annotations

import base64
import importlib.metadata
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from kubesim import KubeSim
from tests.kubesim.kubesim_helpers import pod_manifest
from tests.kubesim.test_localproc import wait_for

SSH = shutil.which("ssh")
pytestmark = pytest.mark.skipif(SSH is None, reason="OpenSSH's ssh is not installed")


def keypair(folder: Path, name: str) -> Path:
    """A new ed25519 key pair made by ssh-keygen; the private key's path."""
    key = folder / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True
    )
    return key


def ssh_argv(key: Path, known_hosts: Path, *extra: str) -> list[str]:
    """ssh with only ``key``, a throwaway known_hosts and no prompts."""
    return [
        str(SSH),
        "-F",
        "/dev/null",
        "-i",
        str(key),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        *extra,
    ]


def ssh_pod(name: str, secret: str) -> dict[str, Any]:
    body = pod_manifest(name)
    body["spec"]["containers"][0]["ports"] = [{"name": "ssh", "containerPort": 2222}]
    body["spec"]["volumes"] = [{"name": "ssh-authorized-keys", "secret": {"secretName": secret}}]
    return body


@pytest.fixture
def psim(tmp_path: Path) -> Iterator[KubeSim]:
    s = KubeSim(startup_delay=0.0, procs_root=str(tmp_path / "procs")).start()
    try:
        yield s
    finally:
        s.stop()


def _accepts(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError:
        return False
    return True


def test_sshd_accepts_the_secrets_keys_and_runs_commands_in_its_folder(
    psim: KubeSim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # kubesim started from a shell whose PATH lacks the virtual environment (make run's):
    # a session still finds the pod's Python, with Ray, first.
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    api = config.new_client_from_config(config_file=psim.write_kubeconfig(str(tmp_path / "kc")))
    core = client.CoreV1Api(api)
    good, other = keypair(tmp_path, "good"), keypair(tmp_path, "other")
    keys = (tmp_path / "good.pub").read_bytes()
    core.create_namespaced_secret(
        "default",
        {
            "metadata": {"name": "keys"},
            "data": {"authorized_keys": base64.b64encode(keys).decode()},
        },
    )
    core.create_namespaced_pod("default", ssh_pod("head", "keys"))
    # Generous waits: on a loaded machine the sshd's interpreter takes its time to start.
    host, port = wait_for(
        lambda: psim.cluster.localprocs.address("default", "head", 2222), timeout=120
    )
    wait_for(lambda: _accepts(host, port), timeout=120)
    known = tmp_path / "known_hosts"

    def run(key: Path, command: str) -> subprocess.CompletedProcess[str]:
        argv = ssh_argv(key, known, "-p", str(port), f"ray@{host}", command)
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)

    done = run(good, "pwd; echo on-the-head")
    assert done.returncode == 0, done.stderr
    workdir = psim.cluster.localprocs.processes("default", "head")["sshd"].workdir
    assert done.stdout.split() == [str(workdir), "on-the-head"]
    assert run(good, "exit 3").returncode == 3
    ray_there = run(good, "python -c 'import ray; print(ray.__version__)'")
    assert ray_there.returncode == 0, ray_there.stderr
    assert ray_there.stdout.strip() == importlib.metadata.version("ray")
    refused = run(other, "true")
    assert refused.returncode == 255
    assert "Permission denied (publickey)" in refused.stderr
    # The pod's log is the server's output: clean, without runpy's warning about a module
    # the package had imported before ``python -m`` ran it.
    log = core.read_namespaced_pod_log("head", "default")
    assert "Warning" not in log, log

    popen = psim.cluster.localprocs.processes("default", "head")["sshd"].popen
    core.delete_namespaced_pod("head", "default", grace_period_seconds=0)
    wait_for(lambda: popen.poll() is not None)
    api.close()


def test_no_sshd_without_the_keys_secret(psim: KubeSim, tmp_path: Path) -> None:
    api = config.new_client_from_config(config_file=psim.write_kubeconfig(str(tmp_path / "kc")))
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", ssh_pod("head", "missing"))
    wait_for(lambda: core.read_namespaced_pod("head", "default").status.phase == "Running")
    assert psim.cluster.localprocs.processes("default", "head") == {}
    api.close()
