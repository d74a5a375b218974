"""Run every reliability suite and write their figures to ``docs/reliability.md``.

Each module in :data:`MODULES` has a ``run(quick: bool) -> str`` that returns one markdown
section (starting with a ``##`` heading); add a suite by adding its module here.
``python -m reliability workers abuse`` runs only the named ones and rewrites only
their sections of the document (benchmarks/document.py); ``--quick`` runs the few
iterations ``make test`` runs and prints the sections without writing the document.
"""

from __future__ import annotations

import importlib
import platform
import sys
import time
import traceback
from pathlib import Path

from benchmarks.document import stamp, write_document

MODULES: list[str] = [
    "reliability.workers",
    "reliability.kubeapi",
    "reliability.clock",
    "reliability.restore",
    "reliability.infra",
    "reliability.abuse",
    "reliability.web",
    "reliability.load",
]
OUTPUT = Path(__file__).resolve().parent.parent / "docs" / "reliability.md"
INTRO = (
    "Each section is one suite, run against the real stack: PostgreSQL, Redis, a Celery "
    "worker and Celery beat as separate processes, kubesim (the simulated Kubernetes API "
    "server) over HTTP, and for the web suites the app under gunicorn. A fault suite "
    "breaks something on purpose, lets the stack converge on its own, and then counts what "
    "was lost: requests that never reached the state asked for, Kubernetes objects made "
    "twice or left behind, GPUs the quota ledger holds that no request holds, usage spans "
    "left open, notifications lost or sent twice. The target everywhere is nothing. Each "
    "section names its command (`python -m reliability <suite>` runs one suite; `--quick` "
    "runs the few iterations `make test` runs in tests/reliability/); faults are placed by "
    "a seeded random generator, so a rerun injects the same sequence. Times depend on the "
    "machine's load, which each section reports."
)


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    names = [a for a in argv if not a.startswith("--")]
    known = {m.rsplit(".", 1)[-1] for m in MODULES}
    unknown = set(names) - known
    if unknown:
        print(f"no such suite: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    wanted = [m for m in MODULES if not names or m.rsplit(".", 1)[-1] in names]
    sections: dict[str, str] = {}
    failed: list[str] = []
    for name in wanted:
        print(f"running {name} ...", flush=True)
        started = time.monotonic()
        try:
            section = importlib.import_module(name).run(quick=quick)
        except Exception:  # noqa: BLE001 - one broken suite must not lose the others' figures
            traceback.print_exc()
            failed.append(name)
            section = f"## {name}\n\nFailed on this run; see the output of `make reliability`."
        print(section, flush=True)
        minutes = (time.monotonic() - started) / 60
        command = (
            "make reliability" if not names else f"python -m reliability {name.rsplit('.', 1)[-1]}"
        )
        sections[name] = stamp(
            f"{section.strip()}\n\nThe suite ran for {minutes:.1f} minutes.", command
        )
    if not quick:
        header = (
            "# Reliability\n\n"
            f"Python {platform.python_version()}, {platform.machine()}, {platform.system()}, "
            "2 CPUs. Every figure below comes from a run on that machine; each section ends "
            "with the command and time of its run (`make reliability` runs every suite; "
            "`python -m reliability NAME` rewrites one section and keeps the others).\n"
            f"\n{INTRO}\n"
        )
        write_document(OUTPUT, header, sections, MODULES)
        print(f"wrote {OUTPUT}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
