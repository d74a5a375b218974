"""make run's metrics: the multi-process directory, and Prometheus when PROMETHEUS=1.

Every child of make run shares ``var/prometheus-multiproc`` (PROMETHEUS_MULTIPROC_DIR,
emptied at each start), so /metrics adds up the web servers' and the Celery worker's
series (docs/metrics.md). With ``PROMETHEUS=1`` make run also starts Debian's
``prometheus`` on PROMETHEUS_PORT (default PORT+6), its data under ``var/prometheus``,
scraping gangway's /metrics every few seconds with the token make run made
(``var/metrics-token``, unless METRICS_TOKEN or METRICS_TOKEN_FILE is set).
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

SCRAPE_SECONDS = 5


def multiprocess_environment(var: Path, env: dict[str, str]) -> None:
    """Point every child at a fresh shared directory (a previous run's files would
    otherwise be added to this one's)."""
    directory = var / "prometheus-multiproc"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    env.setdefault("PROMETHEUS_MULTIPROC_DIR", str(directory))


def wanted(environ: dict[str, str]) -> bool:
    return environ.get("PROMETHEUS", "").strip().lower() in {"1", "true", "yes", "on"}


def binary() -> str:
    """The prometheus command, or an error saying how to install it."""
    found = shutil.which("prometheus")
    if found is None:
        raise SystemExit("PROMETHEUS=1 needs Debian's prometheus: apt-get install -y prometheus")
    return found


def token(var: Path, env: dict[str, str]) -> str:
    """The bearer token Prometheus scrapes with, made once under var/ if none is set."""
    if env.get("METRICS_TOKEN"):
        return env["METRICS_TOKEN"]
    if env.get("METRICS_TOKEN_FILE"):
        return Path(env["METRICS_TOKEN_FILE"]).read_text().strip()
    path = var / "metrics-token"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(32))
        path.chmod(0o600)
    env["METRICS_TOKEN_FILE"] = str(path)
    return path.read_text().strip()


def config(target: str, bearer: str, *, interval: int = SCRAPE_SECONDS) -> str:
    """A Prometheus configuration that scrapes gangway's /metrics at ``target``
    (host:port) with ``bearer`` (YAML is a superset of JSON: quoted strings are safe)."""
    return (
        "global:\n"
        f"  scrape_interval: {interval}s\n"
        f"  evaluation_interval: {interval}s\n"
        "scrape_configs:\n"
        "  - job_name: gangway\n"
        "    metrics_path: /metrics\n"
        "    authorization:\n"
        "      type: Bearer\n"
        f'      credentials: "{bearer}"\n'
        "    static_configs:\n"
        f'      - targets: ["{target}"]\n'
    )


def command(var: Path, port: int, target: str, bearer: str) -> list[str]:
    """Write the configuration under var/prometheus and return the command to start it."""
    home = var / "prometheus"
    (home / "data").mkdir(parents=True, exist_ok=True)
    path = home / "prometheus.yml"
    path.write_text(config(target, bearer))
    path.chmod(0o600)
    return [
        binary(),
        f"--config.file={path}",
        f"--storage.tsdb.path={home / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=2d",
    ]
