#!/usr/bin/env python3
"""`make run`: the whole control plane on one machine, with no servers to install.

Prepares var/ (SQLite database migrated and seeded with the demo data, static files, a
secret key), then starts and watches two kubesims as a fleet ("onprem" with the demo
fleet, "cloud" with L4s that autoscale), a Celery worker and beat
on the embedded broker, the web server (uvicorn, for the WebSockets of Ray's log tail), the
Ray dashboards' origin, a mail sink and a demo webhook receiver; each logs to var/<name>.log
and is restarted if it dies. Ctrl-C stops them all. Environment: PORT, KUBE_PORT,
CLOUD_KUBE_PORT, MAIL_PORT,
WEBHOOK_PORT, REAL_RAY, DEBUG=1, KUBECONFIG (a real cluster: no kubesim), EMAIL_HOST,
RAY_PROXY_ORIGIN, WEB_WORKERS (web server processes), PROMETHEUS=1 and PROMETHEUS_PORT
(a Prometheus scraping it all: scripts/run_prometheus.py). README.md ("make run")
says what each does.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

# Its helper module beside it, whether this runs as a script or is imported (tests).
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_prometheus

ROOT = Path(__file__).resolve().parent.parent
VAR = Path(os.environ.get("GANGWAY_VAR_DIR", ROOT / "var")).resolve()

# A child that ran this long before exiting was not crash-looping: its pause starts over.
STABLE_SECONDS = 30.0
# This many exits in a row, each within STABLE_SECONDS of starting, and make run gives up.
MAX_QUICK_EXITS = 5
MAX_PAUSE_SECONDS = 16
# Clusters whose Ray is real in kubesim (a head costs about 1.5 GB and a few CPU-seconds).
DEFAULT_REAL_RAY = 2
STOP_TIMEOUT_SECONDS = 10
# The token make run registers the cloud kubesim with (kubesim/fleets/cloud.yaml, users:).
CLOUD_TOKEN = "gangway-fleet-demo-token"


def say(line: str) -> None:
    print(line, flush=True)


@dataclass
class Child:
    """One supervised process: how to start it, and its restart bookkeeping."""

    name: str
    cmd: list[str]
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    restarts: int = 0
    quick_exits: int = 0
    restart_at: float | None = None
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = VAR / f"{self.name}.log"

    def start(self, env: dict[str, str]) -> None:
        with self.log.open("ab") as out:
            # A session of its own: Ctrl-C reaches make run alone, which then stops the
            # children in order instead of racing their own reactions to the signal.
            self.proc = subprocess.Popen(
                self.cmd,
                env=env,
                cwd=VAR,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started = time.monotonic()
        self.restart_at = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()

    def wait_stopped(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class GiveUp(Exception):
    """A child keeps dying as soon as it starts: restarting it again would not help."""


def _exit_description(code: int) -> str:
    if code < 0:
        try:
            return f"code {code} ({signal.Signals(-code).name})"
        except ValueError:
            pass
    return f"code {code}"


def check_exit(child: Child, now: float) -> None:
    """If ``child`` has exited, schedule its restart (or give up) and say so."""
    if child.proc is None or child.restart_at is not None:
        return
    code = child.proc.poll()
    if code is None:
        return
    if now - child.started >= STABLE_SECONDS:
        child.quick_exits = 0
    child.quick_exits += 1
    if child.quick_exits >= MAX_QUICK_EXITS:
        raise GiveUp(
            f"{child.name} exited with {_exit_description(code)}, {child.quick_exits} times in "
            f"a row within {STABLE_SECONDS:.0f}s of starting; giving up - see {child.log}"
        )
    pause = min(2 ** (child.quick_exits - 1), MAX_PAUSE_SECONDS)
    child.restarts += 1
    child.restart_at = now + pause
    say(
        f"{child.name} exited with {_exit_description(code)}; restarting in {pause}s "
        f"(restart {child.restarts}) - see {child.log}"
    )


def supervise(children: list[Child], env: dict[str, str]) -> None:
    """Restart children that exit, until Ctrl-C (or a child that cannot stay up)."""
    while True:
        now = time.monotonic()
        for child in children:
            check_exit(child, now)
            if child.restart_at is not None and now >= child.restart_at:
                child.start(env)
        time.sleep(0.25)


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _wait_for_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _port_free(port) and time.monotonic() < deadline:
        time.sleep(0.1)


def _anchored(value: str) -> str:
    """A relative path (or relative sqlite:/// URL) made absolute against the directory
    make run started in: the children run in var/, where it would mean something else."""
    prefix = "sqlite:///"
    if value.startswith(prefix):
        path = value[len(prefix) :]
        if path and path != ":memory:" and not path.startswith("/"):
            return prefix + str(Path(path).resolve())
        return value
    return str(Path(value).resolve()) if value and "://" not in value else value


def debug_on(env: dict[str, str]) -> bool:
    return env["DEBUG"].strip().lower() in {"1", "true", "yes", "on"}


def child_environment() -> dict[str, str]:
    """The environment every step and child runs with."""
    env = dict(os.environ, GANGWAY_VAR_DIR=str(VAR))
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "KUBECONFIG"):
        if env.get(name):
            env[name] = _anchored(env[name])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    env.setdefault("RECONCILE_INTERVAL_SECONDS", "2")
    env.setdefault("SWEEP_INTERVAL_SECONDS", "10")
    env["KUBECONFIG"] = env.get("KUBECONFIG") or str(VAR / "kubeconfig")
    env.setdefault("DEBUG", "0")
    if not debug_on(env):
        # Production's settings, minus what needs TLS: this is plain HTTP on loopback.
        if "SECRET_KEY" not in env and "SECRET_KEY_FILE" not in env:
            env["SECRET_KEY_FILE"] = str(_secret_key_file())
        for name in (
            "SECURE_SSL_REDIRECT",
            "SESSION_COOKIE_SECURE",
            "CSRF_COOKIE_SECURE",
            "SECURE_HSTS_SECONDS",
        ):
            env.setdefault(name, "0")
        # Plain copies: the compressed, hashed storage of production takes ~10 s a start.
        env.setdefault(
            "STATICFILES_STORAGE", "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    return env


def _secret_key_file() -> Path:
    """var/secret-key, made once: sessions and tokens survive a restart of make run."""
    path = VAR / "secret-key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("--kube-port", type=int, default=int(os.environ.get("KUBE_PORT", "6443")))
    parser.add_argument(
        "--cloud-kube-port",
        type=int,
        default=int(os.environ["CLOUD_KUBE_PORT"]) if os.environ.get("CLOUD_KUBE_PORT") else None,
        help="the second kubesim's port, the fleet member cloud (default: KUBE_PORT+1)",
    )
    parser.add_argument(
        "--mail-port",
        type=int,
        default=int(os.environ["MAIL_PORT"]) if os.environ.get("MAIL_PORT") else None,
        help="the mail sink's SMTP port (default: PORT+4)",
    )
    parser.add_argument(
        "--webhook-port",
        type=int,
        default=int(os.environ["WEBHOOK_PORT"]) if os.environ.get("WEBHOOK_PORT") else None,
        help="the demo webhook receiver's port (default: PORT+5)",
    )
    parser.add_argument(
        "--real-ray",
        type=int,
        default=int(os.environ.get("REAL_RAY") or DEFAULT_REAL_RAY),
        help="clusters that run real Ray in kubesim, when the ray package is installed "
        f"(REAL_RAY; default {DEFAULT_REAL_RAY}; 0: every cluster simulated)",
    )
    parser.add_argument(
        "--startup-delay",
        type=float,
        default=2.0,
        help="seconds kubesim takes to start a pod (realism for demos)",
    )
    args = parser.parse_args()
    args.cloud_kube_port = args.cloud_kube_port or args.kube_port + 1
    args.mail_port = args.mail_port or args.port + 4
    args.webhook_port = args.webhook_port or args.port + 5
    args.prometheus_port = int(os.environ.get("PROMETHEUS_PORT") or args.port + 6)
    return args


def _port_in_use(
    args: argparse.Namespace, external_kube: bool, own_mail: bool = False
) -> str | None:
    """Why make run cannot start, naming the variable that moves the busy port; None if
    every port it needs is free."""
    kubesims = {"KUBE_PORT": args.kube_port, "CLOUD_KUBE_PORT": args.cloud_kube_port}
    ports = {"PORT": args.port} | ({} if external_kube else kubesims)
    ports |= {"WEBHOOK_PORT": args.webhook_port} | (
        {"MAIL_PORT": args.mail_port} if own_mail else {}
    )
    for name, port in ports.items():
        if not _port_free(port):
            return f"port {port} is in use (another make run?); choose another: {name}=<port>"
    return None


def _setup_steps(env: dict[str, str]) -> list[list[str]]:
    """The manage.py commands that prepare var/ before any child starts."""
    steps = [
        ["migrate", "--no-input", "-v", "0"],
        ["seed_demo"],
        ["seed_demo_prices"],
        ["seed_demo_service"],
    ]
    if not debug_on(env):
        # Without DEBUG the web server serves static files from var/static (WhiteNoise).
        steps.append(["collectstatic", "--no-input", "-v", "0"])
    return steps


def _kubesim(args: argparse.Namespace, env: dict[str, str]) -> Child:
    """The first member of the fleet, onprem: the demo fleet, settings' KUBECONFIG."""
    return Child(
        "kubesim",
        [
            sys.executable,
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
            "--real-ray",
            str(real_ray_clusters(args.real_ray)),
            "--procs-root",
            str(VAR / "kubesim-procs"),
        ],
    )


def _cloud_kubesim(args: argparse.Namespace) -> Child:
    """The second member, cloud: L4s that autoscale, registered by ``seed_demo_fleet``
    (its Ray stays simulated: the real-Ray slots are onprem's)."""
    return Child(
        "kubesim-cloud",
        [
            sys.executable,
            "-m",
            "kubesim",
            "--port",
            str(args.cloud_kube_port),
            "--config",
            str(ROOT / "kubesim" / "fleets" / "cloud.yaml"),
            "--kubeconfig-out",
            str(VAR / "kubeconfig-cloud"),
            "--startup-delay",
            str(args.startup_delay),
            "--snapshot",
            str(VAR / "kubesim-cloud-state.json"),
        ],
    )


def cloud_server(args: argparse.Namespace) -> str:
    return f"http://127.0.0.1:{args.cloud_kube_port}"


def real_ray_clusters(asked: int) -> int:
    """How many clusters kubesim runs real Ray for: as asked, when Ray is installed."""
    return asked if importlib.util.find_spec("ray") is not None else 0


def own_mail_sink(environ: dict[str, str]) -> bool:
    """Whether make run starts its own mail sink: unless mail is sent somewhere already."""
    return not (environ.get("EMAIL_HOST") or environ.get("EMAIL_BACKEND"))


def notification_environment(args: argparse.Namespace, env: dict[str, str], own_mail: bool) -> None:
    """Point the children's mail at the sink and allow webhooks to the demo receiver
    (and to it alone); links in notices point at this web server."""
    env.setdefault("PUBLIC_BASE_URL", f"http://127.0.0.1:{args.port}")
    receiver = f"127.0.0.1:{args.webhook_port}"
    allowed = env.get("NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS", "")
    env["NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS"] = ",".join(filter(None, [allowed, receiver]))
    if own_mail:
        env.update(
            EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
            EMAIL_HOST="127.0.0.1",
            EMAIL_PORT=str(args.mail_port),
            EMAIL_USE_TLS="0",
            EMAIL_USE_SSL="0",
            MAIL_SINK_DIR=str(VAR / "mail"),
        )


def demo_webhook_url(args: argparse.Namespace) -> str:
    return f"http://127.0.0.1:{args.webhook_port}/hooks/demo"


def notification_sinks(args: argparse.Namespace, own_mail: bool) -> list[Child]:
    """The mail sink (unless mail goes elsewhere) and the demo webhook receiver."""
    sinks = [
        Child(
            "webhooks",
            [
                sys.executable,
                "-m",
                "notifications.webhook_sink",
                "--port",
                str(args.webhook_port),
                "--dir",
                str(VAR / "webhooks"),
            ],
        )
    ]
    if own_mail:
        mail = ["--port", str(args.mail_port), "--dir", str(VAR / "mail")]
        sinks.insert(0, Child("mail", [sys.executable, "-m", "notifications.mailsink", *mail]))
    return sinks


def ray_origin(args: argparse.Namespace, env: dict[str, str]) -> int | None:
    """Give the Ray dashboards their own origin, http://localhost:<PORT+1>, unless the
    environment names one; the port of the web server to start for it, or None. The
    product's own URL (the way back from an expired dashboard) is PUBLIC_BASE_URL, which
    notification_environment has set to where make run serves it."""
    if env.get("RAY_PROXY_ORIGIN"):
        return None
    port = args.port + 1
    env["RAY_PROXY_ORIGIN"] = f"http://localhost:{port}"
    return port


def _ray_web(port: int) -> Child:
    """The Ray origin's web server: the same application, which answers requests for
    that host with the dashboards only (clusters/live/ray_origin.py)."""
    return Child("rayweb", web_command(port))


def web_command(port: int, workers: int = 1) -> list[str]:
    """The web server of make run: the ASGI application under uvicorn on loopback
    (``workers`` processes: WEB_WORKERS, as production's gunicorn runs several)."""
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "controlplane.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--ws",
        "websockets-sansio",
        # Django reads X-Forwarded-For itself (TRUSTED_PROXY_COUNT): uvicorn must not
        # take a loopback client's word for its address.
        "--no-proxy-headers",
        # Open WebSockets (a followed log) are closed on Ctrl-C rather than waited for.
        "--timeout-graceful-shutdown",
        "5",
        *(["--workers", str(workers)] if workers > 1 else []),
    ]


def _children(
    args: argparse.Namespace, env: dict[str, str], external_kube: bool, own_mail: bool = False
) -> list[Child]:
    """The supervised processes, in start order (the kubesims first, unless KUBECONFIG
    is set)."""
    celery = [sys.executable, "-m", "celery", "-A", "controlplane"]
    return [
        *([] if external_kube else [_kubesim(args, env), _cloud_kubesim(args)]),
        *notification_sinks(args, own_mail),
        Child(
            "worker",
            [
                *celery,
                "worker",
                "--pool",
                "solo",
                "--loglevel",
                "INFO",
                # One worker: nothing to synchronise with or to announce itself to.
                "--without-mingle",
                "--without-gossip",
                "--without-heartbeat",
            ],
        ),
        Child(
            "beat",
            [*celery, "beat", "--loglevel", "INFO", "--schedule", str(VAR / "celerybeat-schedule")],
        ),
        Child("web", web_command(args.port, int(env.get("WEB_WORKERS") or 1))),
        *_prometheus(args, env),
    ]


def _prometheus(args: argparse.Namespace, env: dict[str, str]) -> list[Child]:
    """Prometheus scraping the web server, when PROMETHEUS=1."""
    if not run_prometheus.wanted(env):
        return []
    bearer = run_prometheus.token(VAR, env)
    target = f"127.0.0.1:{args.port}"
    return [Child("prometheus", run_prometheus.command(VAR, args.prometheus_port, target, bearer))]


def _start(
    args: argparse.Namespace, env: dict[str, str], steps: list[list[str]], children: list[Child]
) -> None:
    """Run the set-up steps, start every child and say where everything is."""
    manage = [sys.executable, str(ROOT / "manage.py")]
    for step in steps:
        subprocess.run([*manage, *step], check=True, env=env, cwd=VAR)
    for child in children:
        child.start(env)
        if child.name == "kubesim":
            _wait_for_port(args.kube_port, timeout=15)
        if child.name == "kubesim-cloud":
            _wait_for_port(args.cloud_kube_port, timeout=15)
        if child.name in ("mail", "webhooks"):
            _wait_for_port(args.mail_port if child.name == "mail" else args.webhook_port, 15)
    say(
        f"\n  gangway:  http://127.0.0.1:{args.port}/   API docs: "
        f"http://127.0.0.1:{args.port}/api/docs/"
    )
    if any(child.name == "kubesim" for child in children):
        say(
            f"  kubesim:  http://127.0.0.1:{args.kube_port}  (kubectl --kubeconfig "
            f"{env['KUBECONFIG']} get nodes)"
        )
        say(
            f"  fleet:    onprem (the kubesim above, H100s) then cloud at {cloud_server(args)}"
            f" (L4s that autoscale; kubectl --kubeconfig {VAR}/kubeconfig-cloud get nodes)"
        )
    if "MAIL_SINK_DIR" in env:
        say(f"  mail:     {VAR}/mail/*.eml  (and http://127.0.0.1:{args.port}/mail/)")
    say(f"  webhooks: {demo_webhook_url(args)} keeps each under {VAR}/webhooks/")
    say(f"  Ray dashboards: {env['RAY_PROXY_ORIGIN']}/  (their own origin, docs/access.md)")
    if any(child.name == "kubesim" for child in children):
        real = real_ray_clusters(args.real_ray)
        say(
            f"  real Ray: the first {real} clusters run real Ray heads and workers (REAL_RAY)"
            if real
            else "  real Ray: off (REAL_RAY=0, or the ray package is not installed)"
        )
    if any(child.name == "prometheus" for child in children):
        say(
            f"  prometheus: http://127.0.0.1:{args.prometheus_port}/  (scrapes /metrics; "
            "queries in docs/metrics.md)"
        )
    say(f"  logs:     {VAR}/*.log     Ctrl-C stops everything.\n")


def main() -> int:
    args = _arguments()
    external_kube = bool(os.environ.get("KUBECONFIG"))
    own_mail = own_mail_sink(dict(os.environ))
    busy = _port_in_use(args, external_kube, own_mail)
    if busy is not None:
        say(busy)
        return 1

    VAR.mkdir(parents=True, exist_ok=True)
    env = child_environment()
    run_prometheus.multiprocess_environment(VAR, env)
    if run_prometheus.wanted(env) and not _port_free(args.prometheus_port):
        say(f"port {args.prometheus_port} is in use; choose another: PROMETHEUS_PORT=<port>")
        return 1
    notification_environment(args, env, own_mail)
    ray_port = ray_origin(args, env)
    if ray_port is not None and not _port_free(ray_port):
        say(
            f"port {ray_port} (the Ray dashboards' origin, PORT+1) is in use; choose another "
            "PORT, or set RAY_PROXY_ORIGIN"
        )
        return 1
    steps = [*_setup_steps(env), ["demo_webhook", demo_webhook_url(args)]]
    if not external_kube:
        steps.append(["seed_demo_fleet", cloud_server(args), "--token", CLOUD_TOKEN])
    children = _children(args, env, external_kube, own_mail)
    if ray_port is not None:
        children.append(_ray_web(ray_port))

    # SIGINT too: a shell that starts make run in the background has it ignored, and
    # Python keeps an inherited "ignore" - Ctrl-C (or kill -INT) must always stop us.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    try:
        _start(args, env, steps, children)
        supervise(children, env)
    except KeyboardInterrupt:
        return 0
    except GiveUp as exc:
        say(str(exc))
        return 1
    finally:
        # Ignore further Ctrl-C while stopping: a second one must not orphan children.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for child in reversed(children):
            child.stop()
        for child in reversed(children):
            child.wait_stopped()
    return 0


if __name__ == "__main__":
    sys.exit(main())
