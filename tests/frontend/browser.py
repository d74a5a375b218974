"""Shared set-up of the browser tests: Debian's chromium under Playwright, never a
downloaded browser, and a live server whose Celery nudges go nowhere.

Playwright's sync API runs an event loop in the test thread, so Django would refuse
database calls from it as "async-unsafe"; the tests only drive a browser there, which
is why ``DJANGO_ALLOW_ASYNC_UNSAFE`` is set before anything opens the database.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = Path(os.environ.get("GANGWAY_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def launch_args() -> dict[str, Any]:
    """Playwright launch options for the system chromium; fails (never skips) without it."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: browser tests need Debian's chromium "
            "(`apt-get install -y chromium`, which `make test` does as root). "
            "Playwright's own browser download is not used.",
            pytrace=False,
        )
    return {"executable_path": str(CHROMIUM), "args": CHROMIUM_ARGS, "headless": True}


def quiet_nudges(monkeypatch: Any) -> None:
    """No worker runs in the browser tests: services' after-commit nudges are dropped,
    and the tests run the admission pass themselves when they want a state change."""
    from clusters.rows import enqueue

    monkeypatch.setattr(enqueue, "send", lambda *a, **k: None)


def plain_static(settings: Any) -> None:
    """Serve static files as they are (no manifest needs collecting first)."""
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
