"""Run every benchmark and write their figures to ``docs/benchmarks.md``.

Each module listed in :data:`MODULES` has a ``run() -> str`` that returns one markdown
section (starting with a ``##`` heading); add a benchmark by adding its module here.
``python -m benchmarks admission`` runs only the named ones and rewrites only their
sections of the document (benchmarks/document.py). Flags after one name go to its
``run(argv)``: ``python -m benchmarks fleet --members 3 --clusters 1000``.
"""

from __future__ import annotations

import importlib
import platform
import sys
import traceback
from pathlib import Path

from benchmarks.document import stamp, write_document

MODULES = [
    "benchmarks.admission",
    "benchmarks.admission_db",
    "benchmarks.embedded_broker",
    "benchmarks.reconcile",
    "benchmarks.end_to_end",
    "benchmarks.api",
    "benchmarks.api_scale",
    "benchmarks.metrics_cost",
    "benchmarks.service_endpoint",
    "benchmarks.create_cost",
    "benchmarks.kubesim",
    "benchmarks.real_ray",
    "benchmarks.scheduling",
    "benchmarks.fleet",
    "benchmarks.dra",
]
OUTPUT = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def main(argv: list[str]) -> int:
    flags = next((i for i, arg in enumerate(argv) if arg.startswith("-")), len(argv))
    argv, flags = argv[:flags], argv[flags:]
    wanted = [m for m in MODULES if not argv or m.rsplit(".", 1)[-1] in argv]
    unknown = set(argv) - {m.rsplit(".", 1)[-1] for m in MODULES}
    if unknown:
        print(f"no such benchmark: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    if flags and len(argv) != 1:
        print("flags go to one benchmark: name it first", file=sys.stderr)
        return 2
    sections: dict[str, str] = {}
    failed: list[str] = []
    for name in wanted:
        print(f"running {name} ...", flush=True)
        try:
            module = importlib.import_module(name)
            section = module.run(flags) if flags else module.run()
        except Exception:  # noqa: BLE001 - one broken benchmark must not lose the others
            traceback.print_exc()
            failed.append(name)
            section = f"## {name}\n\nFailed on this run; see the output of `make bench`."
        print(section, flush=True)
        command = "make bench" if not argv else f"python -m benchmarks {name.rsplit('.', 1)[-1]}"
        command = " ".join([command, *flags])
        sections[name] = stamp(section, command)
    header = (
        "# Benchmarks\n\n"
        f"Python {platform.python_version()}, {platform.machine()}, {platform.system()}, "
        "2 CPUs. Figures are wall-clock times on that machine; compare ratios, not "
        "absolutes. Each section ends with the run that wrote it (`make bench` runs them "
        "all; `python -m benchmarks NAME` rewrites one section and keeps the others).\n"
    )
    write_document(OUTPUT, header, sections, MODULES)
    print(f"wrote {OUTPUT}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
