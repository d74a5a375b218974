#!/usr/bin/env python3
"""`make run`: the whole control plane on one machine, with no servers to install.

Starts, in this order: the database migrations and demo data (SQLite under var/),
kubesim with the demo fleet (writing var/kubeconfig), a Celery worker and Celery beat
on Kombu's filesystem broker (var/broker), and the web server. Ctrl-C stops every
process it started. Set KUBECONFIG to a real cluster's kubeconfig to skip kubesim.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VAR = Path(os.environ.get("GANGWAY_VAR_DIR", ROOT / "var")).resolve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--kube-port", type=int, default=6443)
    parser.add_argument(
        "--startup-delay",
        type=float,
        default=2.0,
        help="seconds kubesim takes to start a pod (realism for demos)",
    )
    args = parser.parse_args()

    (VAR / "broker" / "processed").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GANGWAY_VAR_DIR=str(VAR))
    env.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    env.setdefault("RECONCILE_INTERVAL_SECONDS", "2")
    env.setdefault("SWEEP_INTERVAL_SECONDS", "10")
    external_kube = "KUBECONFIG" in os.environ
    env.setdefault("KUBECONFIG", str(VAR / "kubeconfig"))
    python = sys.executable
    manage = [python, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--no-input", "-v", "0"], check=True, env=env, cwd=ROOT)
    subprocess.run([*manage, "seed_demo"], check=True, env=env, cwd=ROOT)

    procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(name: str, cmd: list[str]) -> None:
        log = (VAR / f"{name}.log").open("ab")
        procs.append((name, subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=log, stderr=log)))

    if not external_kube:
        start(
            "kubesim",
            [
                python,
                "-m",
                "kubesim",
                "--port",
                str(args.kube_port),
                "--config",
                str(ROOT / "kubesim" / "fleets" / "demo.yaml"),
                "--kubeconfig-out",
                env["KUBECONFIG"],
                "--startup-delay",
                str(args.startup_delay),
                "--snapshot",
                str(VAR / "kubesim-state.json"),
            ],
        )
        deadline = time.monotonic() + 15
        while not Path(env["KUBECONFIG"]).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    start(
        "worker",
        [
            python,
            "-m",
            "celery",
            "-A",
            "controlplane",
            "worker",
            "--pool",
            "solo",
            "--loglevel",
            "INFO",
        ],
    )
    start(
        "beat",
        [
            python,
            "-m",
            "celery",
            "-A",
            "controlplane",
            "beat",
            "--loglevel",
            "INFO",
            "--schedule",
            str(VAR / "celerybeat-schedule"),
        ],
    )
    print(
        f"\n  gangway:  http://127.0.0.1:{args.port}/   API docs: "
        f"http://127.0.0.1:{args.port}/api/docs/"
    )
    if not external_kube:
        print(
            f"  kubesim:  http://127.0.0.1:{args.kube_port}  (kubectl --kubeconfig "
            f"{env['KUBECONFIG']} get nodes)"
        )
    print("  logs:     var/*.log     Ctrl-C stops everything.\n")
    web = subprocess.Popen(
        [*manage, "runserver", f"127.0.0.1:{args.port}", "--noreload"], env=env, cwd=ROOT
    )
    procs.append(("web", web))
    try:
        while all(p.poll() is None for _, p in procs):
            time.sleep(0.5)
        for name, proc in procs:
            if proc.poll() is not None:
                print(f"{name} exited with {proc.returncode}; see var/{name}.log", file=sys.stderr)
    except KeyboardInterrupt:
        pass
    finally:
        for _, proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
