"""``gangway up --notebook`` asks for JupyterLab on the head (docs/notebooks.md), and a
request without it has none."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from clusters.models import ClusterRequest
from tests.cli.conftest import Run
from tests.cli.test_stack import quiet

__all__ = ["quiet"]

pytestmark = pytest.mark.django_db(transaction=True)


def test_up_with_and_without_a_notebook(
    cli: Callable[..., Run], login: Any, bob: Any, quiet: None
) -> None:
    login("bob")
    up = cli("up", "bob-nb", "--flavor", "h100", "--notebook", "--no-wait")
    assert up.code == 0, up
    plain = cli("up", "bob-plain", "--flavor", "h100", "--no-wait")
    assert plain.code == 0, plain
    rows = dict(ClusterRequest.objects.values_list("name", "notebook"))
    assert rows == {"bob-nb": True, "bob-plain": False}
    shown = cli("-o", "json", "status", "bob-nb")
    assert shown.code == 0 and '"notebook": true' in shown.out, shown
