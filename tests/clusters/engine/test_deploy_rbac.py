"""gangway under the RBAC that deploy/ grants it, as a real cluster would hold it to: the
worker runs as the ``gangway`` service account and the web as ``gangway-web`` (kubesim's
tokens for them), with deploy/base/rbac.yaml applied as written. A dev cluster and a job
go their whole way — informers listing and watching, the Ray dashboard read through the
service proxy, a job's log, the capacity page — and nothing is refused."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from django.test import Client

from clusters.models import ClusterRequest
from tests.clusters.engine.conftest import ROOT, engine_worker, running_kubesim, wait_for

CLUSTERS = "/api/v1/tenants/acme/clusters/"
JOBS = "/api/v1/tenants/acme/jobs/"


def _row(name: str) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().get(name=name)


def test_the_worker_and_the_web_need_nothing_their_roles_do_not_grant(
    transactional_db: Any,
    tmp_path: Path,
    settings: Any,
    as_user: Any,
    bob: Any,
    root: Any,
    l4: Any,
) -> None:
    with running_kubesim(tmp_path, settings) as sim:
        sim.set_rayjob_defaults(run_seconds=1, pending_seconds=0)
        applied = subprocess.run(
            ["/usr/bin/kubectl", "apply", "-f", str(ROOT / "deploy/base/rbac.yaml")],
            env=dict(os.environ, KUBECONFIG=settings.KUBECONFIG, HOME=str(tmp_path)),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert applied.returncode == 0, applied.stderr
        settings.KUBECONFIG = sim.write_kubeconfig(str(tmp_path / "worker"), context="gangway")
        with engine_worker(tmp_path) as worker:
            # The web (this process) is gangway-web from here on.
            settings.KUBECONFIG = sim.write_kubeconfig(str(tmp_path / "web"), context="gangway-web")
            api = as_user(bob)
            assert api.post(CLUSTERS, {"name": "dev", "flavor": "l4"}).status_code == 201
            wait_for(lambda: _row("dev").state == "ready", what="the cluster ready", timeout=90)
            assert sim.active_watches > 0  # the worker's informers watch

            page = Client()
            page.force_login(bob)
            dashboard = page.get("/t/acme/clusters/dev/ray/api/jobs/")
            assert dashboard.status_code == 200, dashboard.status_code

            body = {"name": "train", "entrypoint": "python train.py", "flavor": "l4"}
            assert api.post(JOBS, body, format="json").status_code == 201
            wait_for(lambda: _row("train").state == "succeeded", what="the job done", timeout=90)
            logs = api.get(JOBS + "train/logs/")
            assert logs.status_code == 200 and logs.json()["text"], logs.content[:300]
            assert logs.json()["origin"] == "pod", logs.json()  # read now, not the saved tail

            admin = Client()
            admin.force_login(root)
            capacity = admin.get("/capacity/").content.decode()
            assert "data-nodes-error" not in capacity and 'data-node="' in capacity  # read live

            assert api.delete(CLUSTERS + "dev/").status_code == 202
            wait_for(lambda: _row("dev").state == "deleted", what="the cluster deleted")
        log = worker.log.read_text()
    refused = [line for line in log.splitlines() if "forbidden" in line or "may not" in line]
    assert not refused, "\n".join(refused[:10])
