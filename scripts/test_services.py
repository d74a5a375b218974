#!/usr/bin/env python3
"""Find or start the PostgreSQL and Redis servers that `make test` needs.

Also installs Debian's Chromium for the browser tests when it is missing (as root).
Prints shell `export` lines for DATABASE_URL and REDIS_URL/CELERY_BROKER_URL, so the
Makefile can `eval` them. It uses the servers at the configured URLs (defaults:
127.0.0.1:5432 and 127.0.0.1:6379) when they answer; otherwise it starts throwaway
ones under var/test-services/ on other ports, installing the Debian packages first
when run as root and they are missing. It exits non-zero with a clear message when
it can do neither. Messages go to stderr; only the exports go to stdout.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / "var" / "test-services"
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/gangway"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
THROWAWAY_PG_PORT = 55432
THROWAWAY_REDIS_PORT = 56379


def say(message: str) -> None:
    print(f"test-services: {message}", file=sys.stderr)


def answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def wait_for(host: str, port: int, what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if answers(host, port):
            return
        time.sleep(0.2)
    raise SystemExit(f"test-services: {what} did not start on {host}:{port}")


def apt_install(*packages: str) -> None:
    if os.geteuid() != 0:
        raise SystemExit(
            f"test-services: {', '.join(packages)} missing and not root; install them "
            f"(apt-get install -y {' '.join(packages)}) or set DATABASE_URL/REDIS_URL"
        )
    say(f"installing {' '.join(packages)} with apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, stdout=sys.stderr)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", *packages], check=True, env=env, stdout=sys.stderr
    )


def pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def start_postgres() -> str:
    if pg_bin("initdb") is None:
        apt_install("postgresql")
    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        raise SystemExit("test-services: PostgreSQL binaries not found after install")
    data = STATE / "pg"
    STATE.mkdir(parents=True, exist_ok=True)
    as_user: list[str] = []
    if os.geteuid() == 0:
        # PostgreSQL refuses to run as root: run it as the postgres system user.
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(STATE, "postgres")
    if not (data / "PG_VERSION").exists():
        subprocess.run(
            [*as_user, initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
            check=True,
            stdout=sys.stderr,
        )
    say(f"starting a throwaway PostgreSQL on 127.0.0.1:{THROWAWAY_PG_PORT}")
    subprocess.run(
        [
            *as_user,
            pg_ctl,
            "-D",
            str(data),
            "-l",
            str(STATE / "pg.log"),
            "-w",
            "start",
            "-o",
            f"-p {THROWAWAY_PG_PORT} -h 127.0.0.1 -k {STATE}",
        ],
        check=True,
        stdout=sys.stderr,
    )
    wait_for("127.0.0.1", THROWAWAY_PG_PORT, "PostgreSQL")
    return f"postgres://postgres@127.0.0.1:{THROWAWAY_PG_PORT}/gangway"


def start_redis() -> str:
    if shutil.which("redis-server") is None:
        apt_install("redis-server")
    say(f"starting a throwaway Redis on 127.0.0.1:{THROWAWAY_REDIS_PORT}")
    STATE.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "redis-server",
            "--daemonize",
            "yes",
            "--bind",
            "127.0.0.1",
            "--port",
            str(THROWAWAY_REDIS_PORT),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(STATE),
            "--logfile",
            str(STATE / "redis.log"),
        ],
        check=True,
        stdout=sys.stderr,
    )
    wait_for("127.0.0.1", THROWAWAY_REDIS_PORT, "Redis")
    return f"redis://127.0.0.1:{THROWAWAY_REDIS_PORT}/0"


def ensure_chromium() -> None:
    """The browser tests drive Debian's Chromium; install it when missing (as root)."""
    if Path("/usr/bin/chromium").exists():
        return
    if os.geteuid() != 0:
        say(
            "/usr/bin/chromium is missing and we are not root: the browser tests will fail "
            "(apt-get install -y chromium)"
        )
        return
    apt_install("chromium")


def ensure_prometheus() -> None:
    """The metrics end-to-end test runs Debian's Prometheus; install it when missing."""
    if shutil.which("prometheus"):
        return
    if os.geteuid() != 0:
        say(
            "prometheus is missing and we are not root: tests/test_prometheus.py will fail "
            "(apt-get install -y prometheus)"
        )
        return
    apt_install("prometheus")


def main() -> None:
    db_url = os.environ.get("DATABASE_URL") or DEFAULT_DB
    if not db_url.startswith("postgres"):
        raise SystemExit("test-services: DATABASE_URL must point at PostgreSQL for the tests")
    db = urlparse(db_url)
    if not answers(db.hostname or "127.0.0.1", db.port or 5432):
        say(f"no PostgreSQL answers at {db.hostname}:{db.port or 5432}")
        db_url = start_postgres()
    redis_url = os.environ.get("REDIS_URL") or DEFAULT_REDIS
    rd = urlparse(redis_url)
    if not answers(rd.hostname or "127.0.0.1", rd.port or 6379):
        say(f"no Redis answers at {rd.hostname}:{rd.port or 6379}")
        redis_url = start_redis()
    ensure_chromium()
    ensure_prometheus()
    print(f"export DATABASE_URL='{db_url}'")
    print(f"export REDIS_URL='{redis_url}'")
    print(f"export CELERY_BROKER_URL='{redis_url}'")


if __name__ == "__main__":
    main()
