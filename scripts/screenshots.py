#!/usr/bin/env python3
"""Take the dashboard screenshots in docs/screenshots/ (home, cluster list, new-cluster
form with its verdict, cluster details, queue, usage, job list, a job's page, new-job form;
and the administrators' pages: tenants, a tenant's quota preview, users, the GPU
catalogue, members, a request's controls, capacity, fair share, platform usage, the audit
log, the what-if planner, and the queue on a phone).

Runs ``tests/frontend/screenshot_scene.py`` — demo data, clusters moved through their
states by the services and the admission pass, Debian's chromium — with
``GANGWAY_SCREENSHOTS_DIR`` set. Needs the test database (``DATABASE_URL``, as for
``make test``) and /usr/bin/chromium. Usage: ``python scripts/screenshots.py [out_dir]``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "screenshots"
    env = {**os.environ, "GANGWAY_SCREENSHOTS_DIR": str(out.resolve())}
    command = [sys.executable, "-m", "pytest", "tests/frontend/screenshot_scene.py", "-q"]
    return subprocess.call(command, cwd=ROOT, env=env)


if __name__ == "__main__":
    raise SystemExit(main())
