"""``manage.py kubecluster`` against a real kubesim: add, list, cordon, uncordon, check,
rotate-keys and remove, as a platform admin; refusals are command errors."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import CommandError, call_command

from clusters.members import access
from clusters.models import KubeCluster
from kubesim import KubeSim
from tenants.models import AuditEvent


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("kubecluster", *args, stdout=out)
    return out.getvalue()


def test_the_command_manages_a_member(
    root: Any, acme: Any, member_sim: KubeSim, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("member-token\n")
    said = run(
        "--as", "root", "add", "onprem", "--server", member_sim.url, "--token-file", str(token),
        "--region", "eu", "--label", "site=lab", "--order", "5", "--tenant", "acme",
    )  # fmt: skip
    assert said.startswith("Registered onprem: Kubernetes v1.")
    member = KubeCluster.objects.get(name="onprem")
    assert (member.region, member.labels, member.placement_order) == ("eu", {"site": "lab"}, 5)
    assert [t.slug for t in member.allowed_tenants.all()] == ["acme"]
    assert AuditEvent.objects.unscoped().get(action="kube_cluster.register").actor == root

    listing = run("list").splitlines()
    assert listing[0].split()[:3] == ["NAME", "ORDER", "REGION"]
    assert any(line.split()[:5] == ["onprem", "5", "eu", "active", "yes"] for line in listing)

    assert run("--as", "root", "cordon", "onprem") == "onprem is cordoned.\n"
    assert run("--as", "root", "uncordon", "onprem") == "onprem is active.\n"
    assert run("--as", "root", "check", "onprem") == "onprem passes the check.\n"
    assert "1 cluster(s)" in run("--as", "root", "rotate-keys")
    assert run("--as", "root", "remove", "onprem") == "Removed onprem.\n"
    assert not KubeCluster.objects.filter(name="onprem").exists()


def test_refusals_are_command_errors(
    alice: Any, root: Any, member_sim: KubeSim, tmp_path: Path
) -> None:
    with pytest.raises(CommandError, match="--as USERNAME"):
        run("cordon", "default")
    with pytest.raises(CommandError, match="Only platform admins"):
        run("--as", "alice", "rotate-keys")
    with pytest.raises(CommandError, match="no Kubernetes cluster named 'nowhere'"):
        run("--as", "root", "cordon", "nowhere")
    with pytest.raises(CommandError, match="Give a token or a client certificate"):
        run("--as", "root", "add", "bad", "--server", member_sim.url)
    (tmp_path / "token").write_text("not-a-token")
    with pytest.raises(CommandError, match="401 Unauthorized"):
        run(
            "--as",
            "root",
            "add",
            "bad",
            "--server",
            member_sim.url,
            "--token-file",
            str(tmp_path / "token"),
        )
    assert not KubeCluster.objects.filter(name="bad").exists()


def test_rbac_prints_the_role_the_check_asks_for(settings: Any) -> None:
    role = yaml.safe_load(run("rbac"))
    assert role["kind"] == "ClusterRole"
    assert role == yaml.safe_load(access.cluster_role(queue_mode="builtin", kai_enabled=False))
    settings.QUEUE_MODE = "kueue"
    assert "kueue.x-k8s.io" in run("rbac")
