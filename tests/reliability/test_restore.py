"""``reliability.restore`` at its quick size: a pg_dump restored into a fresh database
while clusters exist; the dry run lists exactly the difference and changes nothing, and
the engine converges Kubernetes to the restored rows without touching what they want."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings

from reliability import restore
from reliability.rig import seed

pytestmark = pytest.mark.slow


def test_a_restored_backup_converges_without_deleting_what_it_wants(make_rig: Any) -> None:
    db = settings.DATABASES["default"]
    url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    rig = make_rig()
    result = restore.exercise(rig, seed(), quick=True, database_url=url)
    assert settings.DATABASES["default"]["NAME"] == db["NAME"]  # back on the test database
    # The later clusters run unknown to the restored rows; the deleted one is wanted again.
    assert len(result.unwanted) == restore.QUICK["after"]
    assert len(result.missing) == restore.QUICK["deleted"]
    assert {d.rsplit("/", 1)[1] for d in result.planned_deletes} == result.unwanted
    assert {w.rsplit("/", 1)[1] for w in result.planned_writes} >= result.missing
    assert result.wrong_deletes == []
    assert not result.dry_run_changed
    assert result.convergence is not None
    assert result.audit.clean, result.audit.details
