"""A write Kubernetes refuses for want of RBAC, through the real loop: the worker runs as
gangway's service account (kubesim's ``gangway`` token) under the ClusterRole that
deploy/base/rbac.yaml declares, less ``rayjobs``; the job fails and its recorded error
says what gangway may not do and what to grant, as access reviews told the gateway."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from clusters.models import ClusterRequest
from tests.clusters.engine.conftest import ROOT, engine_worker, running_kubesim, wait_for

JOBS = "/api/v1/tenants/acme/jobs/"


def _without_rayjobs() -> str:
    """deploy/base/rbac.yaml with ``rayjobs`` taken out of the ray.io rule."""
    docs = list(yaml.safe_load_all((ROOT / "deploy/base/rbac.yaml").read_text()))
    for rule in docs[0]["rules"]:
        if "rayjobs" in rule.get("resources", []):
            rule["resources"].remove("rayjobs")
    return yaml.safe_dump_all(docs)


def test_a_refused_rayjob_says_what_to_grant(
    transactional_db: Any, tmp_path: Path, settings: Any, as_user: Any, bob: Any
) -> None:
    with running_kubesim(tmp_path, settings) as sim:
        applied = subprocess.run(
            ["/usr/bin/kubectl", "apply", "-f", "-"],
            input=_without_rayjobs(),
            env=dict(os.environ, KUBECONFIG=settings.KUBECONFIG, HOME=str(tmp_path)),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert applied.returncode == 0, applied.stderr
        gangway = tmp_path / "gangway.kubeconfig"
        settings.KUBECONFIG = sim.write_kubeconfig(str(gangway), context="gangway")
        with engine_worker(tmp_path) as worker:
            body = {"name": "train", "entrypoint": "python train.py", "flavor": "l4", "workers": 1}
            response = as_user(bob).post(JOBS, body, format="json")
            assert response.status_code == 201, response.content
            row = wait_for(
                lambda: (
                    ClusterRequest.objects.unscoped().filter(name="train", state="failed").first()
                ),
                what="the job failed",
            )
    assert row.last_error.startswith(
        "apply RayJob gw-acme/train: gangway's service account gangway-system/gangway may not "
        "patch or create rayjobs in gw-acme: grant system:serviceaccount:gangway-system:gangway "
        'patch, create on rayjobs in API group "ray.io" (a rule of gangway\'s ClusterRole, '
        "deploy/base/rbac.yaml). The API server said: 403 "
        'rayjobs.ray.io "train" is forbidden: User "system:serviceaccount:gangway-system:gangway" '
        'cannot patch resource "rayjobs" in API group "ray.io" in the namespace "gw-acme"'
    ), row.last_error
    # The worker logs the same words.
    assert "may not patch or create rayjobs in gw-acme: grant" in worker.log.read_text()
