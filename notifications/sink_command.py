"""The command line both of make run's notification sinks take (mail and webhooks)."""

from __future__ import annotations

import argparse
from pathlib import Path


def sink_arguments(description: str, argv: list[str] | None) -> argparse.Namespace:
    """``--host`` (loopback unless told), ``--port`` and ``--dir`` (where each message
    received is kept as a file; made if missing, returned absolute)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args(argv)
    args.dir = args.dir.resolve()
    args.dir.mkdir(parents=True, exist_ok=True)
    return args
