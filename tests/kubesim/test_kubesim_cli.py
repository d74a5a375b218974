"""``python -m kubesim`` as a separate process: kubeconfig, listening line, SIGTERM saves
the snapshot."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from kubernetes import client, config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cli_serves_and_saves_snapshot(tmp_path: Path) -> None:
    port = free_port()
    kubeconfig = tmp_path / "kc.yaml"
    snap = tmp_path / "snap.json"
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubesim",
            "--port",
            str(port),
            "--config",
            str(repo / "kubesim" / "fleets" / "large.yaml"),
            "--kubeconfig-out",
            str(kubeconfig),
            "--snapshot",
            str(snap),
        ],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(repo)),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"kubesim listening on http://127.0.0.1:{port}" in line
        api = config.new_client_from_config(config_file=str(kubeconfig))
        core = client.CoreV1Api(api)
        nodes = core.list_node().items
        assert len(nodes) == 64 + 32 + 36 + 16
        core.create_namespace({"metadata": {"name": "from-cli"}})
        api.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    assert proc.returncode == 0
    assert "from-cli" in snap.read_text()


def test_cli_rayjob_flags_set_the_driver_defaults() -> None:
    from kubesim.__main__ import parse_args

    args = parse_args(["--rayjob-run-seconds", "2.5", "--rayjob-outcome", "failed"])
    assert (args.rayjob_run_seconds, args.rayjob_outcome) == (2.5, "failed")
    defaults = parse_args([])
    assert (defaults.rayjob_run_seconds, defaults.rayjob_outcome) == (None, None)
