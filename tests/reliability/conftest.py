"""The quick versions of ``make reliability``'s fault suites, on the test database.

The rig is the suites' own (:mod:`reliability.rig`): a prefork Celery worker and beat as
separate processes against the test database, kubesim over HTTP in this process; the
mail server a real SMTP server on loopback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from reliability.rig import Inbox, Rig, build_rig
from tests.clusters.engine.conftest import kubesim  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow


@pytest.fixture
def inbox() -> Iterator[Inbox]:
    box = Inbox()
    box.controller.start()
    try:
        yield box
    finally:
        box.controller.stop()


@pytest.fixture
def make_rig(
    transactional_db: Any,
    kubesim: Any,  # noqa: F811 - the imported fixture
    tmp_path: Path,
) -> Iterator[Callable[..., Rig]]:
    """Start the rig with extra worker environment; stopped after the test."""
    from controlplane.celery import app

    started: list[Rig] = []
    db = settings.DATABASES["default"]
    url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"

    def make(**env: str) -> Rig:
        rig = build_rig(sim=kubesim, database_url=url, var=tmp_path, **env)
        started.append(rig)
        return rig

    try:
        yield make
    finally:
        for rig in started:
            rig.stop()
        app.conf.task_default_queue = settings.CELERY_TASK_DEFAULT_QUEUE
