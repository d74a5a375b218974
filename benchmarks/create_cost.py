"""What one create costs the web server, in instructions: a figure the machine's load does
not move.

On two shared cores the end-to-end benchmark's wall times vary by a quarter between runs,
so a change worth a tenth of a create's CPU vanishes in the noise. valgrind's callgrind
counts the instructions the create executes instead: repeatable for the same code, inputs
and machine whatever runs beside it. PostgreSQL and Redis are other processes, not
counted. Needs ``valgrind``; the section says so when it is missing.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import support

# A child process sends ``POST /api/v1/tenants/<t>/clusters/`` through the WSGI application
# (the path gunicorn calls: middleware, token authentication, DRF, the create service, its
# three INSERTs, the answer), WARMUP creates and then FEW or MANY more; the difference of the
# two runs over MANY - FEW creates is the cost of one, the set-up cancelled out.
FEW = 10
MANY = 110
WARMUP = 30
TENANT = "cost"
# Nothing consumes the admission nudges the creates send; the throttle's counters live
# here too, as in production (a shared Redis cache).
REDIS_DB = 11


def _child(creates: int) -> None:
    """Run in the measured process: set up, warm up, then ``creates`` creates."""
    os.environ.update(
        support.production_env(
            THROTTLE_WRITE="1000000/min",
            CACHE_URL=support.redis_url(REDIS_DB),
            CELERY_BROKER_URL=support.redis_url(REDIS_DB),
        )
    )
    # The parent made and migrated this database and passed it in DATABASE_URL.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from knox.models import AuthToken

    from controlplane.wsgi import application
    from tenants.models import Membership, Quota, Role, Tenant

    support.truncate_product_tables()
    flavor = support.h100_flavor(1000)
    tenant = Tenant.objects.create(
        slug=TENANT,
        name="Create cost",
        namespace=f"gw-{TENANT}",
        max_dev_clusters_per_user=100_000,
        max_dev_gpus_per_user=100_000,
    )
    Quota.objects.create(tenant=tenant, flavor=flavor, gpus=100_000, borrow_limit=0)
    user, _ = get_user_model().objects.get_or_create(username="cost-engineer")
    Membership.objects.create(tenant=tenant, user=user, role=Role.ENGINEER)
    _, token = AuthToken.objects.create(user=user)

    def create(name: str) -> None:
        body = json.dumps({"flavor": "h100", "kind": "dev", "workers": 1, "name": name}).encode()
        environ: dict[str, Any] = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": f"/api/v1/tenants/{TENANT}/clusters/",
            "QUERY_STRING": "",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)),
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "HTTP_HOST": "127.0.0.1",
            "HTTP_AUTHORIZATION": f"Token {token}",
            "REMOTE_ADDR": "127.0.0.1",
            "wsgi.input": io.BytesIO(body),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.version": (1, 0),
            "wsgi.multithread": False,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }
        status: list[str] = []

        def start_response(line: str, headers: Any, exc_info: Any = None) -> Any:
            status.append(line)
            return lambda data: None

        answer = b"".join(application(environ, start_response))
        if not status[0].startswith("201"):
            raise RuntimeError(f"create {name}: {status[0]} {answer[:300]!r}")

    for i in range(WARMUP + creates):
        create(f"c{i}")


def _instructions(creates: int) -> int:
    """Instructions the child executed in all, counted by callgrind."""
    with tempfile.TemporaryDirectory(prefix="gangway-cost-") as tmp:
        out = Path(tmp) / "callgrind.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--cache-sim=no",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-m",
            "benchmarks.create_cost",
            "--child",
            str(creates),
        ]
        subprocess.run(command, check=True, capture_output=True, timeout=1800)
        for line in out.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError("callgrind wrote no totals")


def run() -> str:
    if shutil.which("valgrind") is None:
        return "## Cost of one create\n\nNot measured: valgrind is not installed."
    import redis

    support.setup_django("create_cost")  # created and migrated once, before the counts
    redis.Redis.from_url(support.redis_url(REDIS_DB)).flushdb()
    few, many = _instructions(FEW), _instructions(MANY)
    per_create = (many - few) / (MANY - FEW)
    return "\n".join(
        [
            "## Cost of one create, in instructions",
            "",
            "`POST /api/v1/tenants/<t>/clusters/` through the WSGI application with "
            "production settings, in one process under valgrind's callgrind "
            f"({WARMUP} warm-up creates, then {FEW} and {MANY} in two runs; the "
            "difference over the extra creates is one create's cost). Instructions do not "
            "depend on the machine's load, so this figure compares commits where the "
            "end-to-end run's wall times cannot. PostgreSQL's and Redis's work is not in it.",
            "",
            "| | instructions |",
            "|---|---:|",
            f"| one create (web server process) | {per_create / 1e6:.2f} M |",
            f"| the run of {FEW} creates, set-up included | {few / 1e9:.2f} G |",
            f"| the run of {MANY} creates, set-up included | {many / 1e9:.2f} G |",
        ]
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(int(sys.argv[2]))
    else:
        print(run())
