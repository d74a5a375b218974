"""The access a member must grant is the union of what deploy/ grants gangway's worker
and web, in every mode: the credential check's reviews, the ClusterRole of
``manage.py kubecluster rbac`` and deploy/ cannot drift apart."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
import yaml

from clusters.members import access
from tests.deploy.test_kustomize import ROOT, WEB_SA, WORKER_SA, config, grants, render

MODES = {
    "base": ("builtin", False),
    "overlays/kueue": ("kueue", False),
    "kai": ("builtin", True),
}


def _rules_as_grants(rules: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                found[(group, resource)] |= set(rule["verbs"])
    return dict(found)


@pytest.mark.parametrize("target", sorted(MODES))
def test_the_member_role_is_what_deploy_grants_the_worker_and_the_web(target: str) -> None:
    docs = render(target)
    queue_mode, kai = MODES[target]
    assert config(docs)["QUEUE_MODE"] == queue_mode
    deployed: dict[tuple[str, str], set[str]] = defaultdict(set)
    for account in (WORKER_SA, WEB_SA):
        for key, verbs in grants(docs, account).items():
            deployed[key] |= verbs
    role = yaml.safe_load(access.cluster_role(queue_mode=queue_mode, kai_enabled=kai))
    assert _rules_as_grants(role["rules"]) == dict(deployed)


def test_the_required_custom_resources_follow_the_modes() -> None:
    builtin = access.required_crds(queue_mode="builtin", kai_enabled=False)
    assert builtin == ["rayclusters.ray.io", "rayjobs.ray.io", "rayservices.ray.io"]
    kueue = access.required_crds(queue_mode="kueue", kai_enabled=True)
    assert {"clusterqueues.kueue.x-k8s.io", "queues.scheduling.run.ai"} <= set(kueue)


def test_the_role_in_the_docs_is_the_one_the_check_asks_for() -> None:
    text = (ROOT / "docs" / "fleet.md").read_text()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert yaml.safe_load(block) == yaml.safe_load(
        access.cluster_role(queue_mode="builtin", kai_enabled=False)
    )
