#!/usr/bin/env python3
"""`make run`: the embedded default on one machine, no servers needed.

Migrates the SQLite database under var/, loads the demo data (printing the logins)
and serves the web app. Ctrl-C stops everything it started.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--no-input", "-v", "0"], check=True, env=env)
    subprocess.run([*manage, "seed_demo"], check=True, env=env)
    print(f"\n  gangway is serving on http://127.0.0.1:{args.port}/  (Ctrl-C stops it)\n")
    with contextlib.suppress(KeyboardInterrupt):
        subprocess.run([*manage, "runserver", f"127.0.0.1:{args.port}", "--noreload"], env=env)


if __name__ == "__main__":
    main()
