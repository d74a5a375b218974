"""A Ray job's driver that checkpoints on notice with ``gangway_preemption``, as a user
would write one (docs/preemption.md): ``python checkpointing_driver.py <dir> <steps>``.

It does ``steps`` steps of a second each, from the checkpoint in ``GANGWAY_RESUME_FROM``
when it has one. Each finished step is a line in ``<dir>/steps.log``; each run's start
(what it resumed from, its first step) a line in ``<dir>/runs.log``. After each step it
asks for notice; with notice it saves ``<dir>/step-<next>.json``, reports its ``file://``
URI and waits to be stopped, doing no more work.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import gangway_preemption as gp

STEP_SECONDS = 1.0


def main(root: Path, steps: int) -> None:
    """Run the steps left, checkpointing and stopping on notice."""
    resume = gp.resume_from()
    first = json.loads(Path(urlparse(resume).path).read_text())["next"] if resume else 0
    with (root / "runs.log").open("a") as runs:
        runs.write(f"{resume or '-'} {first}\n")
    for step in range(first, steps):
        time.sleep(STEP_SECONDS)
        with (root / "steps.log").open("a") as done:
            done.write(f"{step}\n")
        if gp.notice() is not None:
            saved = root / f"step-{step + 1}.json"
            saved.write_text(json.dumps({"next": step + 1}))
            gp.checkpoint_saved(saved.as_uri())
            print(f"checkpoint saved at {saved.as_uri()}", flush=True)
            # The run is stopped at the deadline; a driver that ended here would count
            # as a job that succeeded.
            while True:
                time.sleep(60)
    print(f"all {steps} steps done", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
