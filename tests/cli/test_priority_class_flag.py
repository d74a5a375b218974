"""``--priority-class`` on ``up``, ``job submit`` and ``service submit`` picks the
request's platform priority class; ``gangway status`` shows it; ``gangway
priority-classes`` lists the ones the tenant may pick; a class it may not pick is an
error in the server's words and nothing is created."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clusters.models import ClusterRequest
from tenants.models import PriorityClass
from tests.cli.conftest import Run
from tests.cli.test_stack import quiet

__all__ = ["quiet"]

pytestmark = pytest.mark.django_db(transaction=True)

SERVE_CONFIG = """applications:
- name: app
  import_path: app:deployment
  deployments:
  - name: Model
    num_replicas: 1
"""


def test_create_commands_pick_a_class(
    cli: Callable[..., Run],
    login: Any,
    acme: Any,
    bob: Any,
    globex: Any,
    quiet: None,
    tmp_path: Path,
) -> None:
    acme.max_dev_clusters_per_user = acme.max_dev_gpus_per_user = 5  # three of bob's
    acme.save(update_fields=["max_dev_clusters_per_user", "max_dev_gpus_per_user"])
    PriorityClass.objects.all().delete()
    PriorityClass.objects.create(name="normal", value=0, is_default=True, description="Default.")
    PriorityClass.objects.create(name="high", value=100, description="Deadlines.")
    PriorityClass.objects.create(name="theirs", value=50).tenants.set([globex])
    login("bob")
    listed = cli("priority-classes")
    assert listed.code == 0, listed
    assert "high" in listed.out and "Deadlines." in listed.out and "theirs" not in listed.out
    up = cli("up", "pc-up", "--flavor", "l4", "--priority-class", "high", "--no-wait")
    assert up.code == 0, up
    job = cli("job", "submit", "-c", "python x.py", "--name", "pc-job", "-f", "l4",
              "--priority-class", "high")  # fmt: skip
    assert job.code == 0, job
    config = tmp_path / "serve.yaml"
    config.write_text(SERVE_CONFIG)
    service = cli("service", "submit", "-c", str(config), "--name", "pc-svc", "-f", "l4",
                  "--priority-class", "high")  # fmt: skip
    assert service.code == 0, service
    classes = {r.name: r.priority_class.name for r in ClusterRequest.objects.all()}
    assert classes == {"pc-up": "high", "pc-job": "high", "pc-svc": "high"}
    status = cli("status", "pc-up")
    assert status.code == 0, status
    assert "priority class" in status.out and "high" in status.out
    refused = cli("up", "pc-no", "--flavor", "l4", "--priority-class", "theirs", "--no-wait")
    assert refused.code != 0
    assert "acme may not use priority class theirs" in refused.err + refused.out
    assert not ClusterRequest.objects.filter(name="pc-no").exists()
