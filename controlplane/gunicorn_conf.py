"""gunicorn's hooks for the multi-process metrics (``--config python:controlplane.gunicorn_conf``).

The master empties ``PROMETHEUS_MULTIPROC_DIR`` before it forks (a restarted container's
emptyDir keeps the files of the processes before it), and drops an exited worker's
live gauge files (docs/metrics.md, "Several processes").
"""

from __future__ import annotations

import os
import shutil
from typing import Any


def on_starting(server: Any) -> None:
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory, exist_ok=True)


def child_exit(server: Any, worker: Any) -> None:
    from controlplane.metrics import process_exited

    process_exited(worker.pid)
