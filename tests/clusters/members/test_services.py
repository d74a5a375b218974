"""Registering, changing and removing fleet members against a real kubesim over HTTP:
the credential check refuses what gangway could not work with and saves nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection

from clusters.members import services
from clusters.models import ClusterRequest, KubeCluster, Schedulable
from controlplane.exceptions import ServiceConflict
from controlplane.sealed import unseal
from kubesim import KubeSim
from tenants.models import AuditEvent
from tests.clusters.members.conftest import start_member_sim


def register(actor: Any, sim: KubeSim, token: str = "member-token", **more: Any) -> KubeCluster:
    return services.kube_cluster_register(
        actor=actor, name="onprem", server=sim.url, token=token, region="eu", **more
    )


def test_a_cluster_with_good_credentials_is_saved_with_its_version_and_sealed_token(
    root: Any, acme: Any, member_sim: KubeSim
) -> None:
    member = register(root, member_sim, labels={"site": "lab"}, allowed_tenants=[acme])
    member.refresh_from_db()
    assert member.reachable and member.kubernetes_version.startswith("v1.")
    assert member.operators["KubeRay"] == [
        "rayclusters.ray.io",
        "rayjobs.ray.io",
        "rayservices.ray.io",
    ]
    assert member.api_latency_ms is not None and member.checked_at is not None
    assert list(member.allowed_tenants.all()) == [acme]
    with connection.cursor() as cursor:
        cursor.execute("SELECT token_encrypted FROM clusters_kubecluster WHERE name = 'onprem'")
        (stored,) = cursor.fetchone()
    assert "member-token" not in stored and unseal(stored) == "member-token"
    event = AuditEvent.objects.unscoped().get(action="kube_cluster.register")
    assert event.data["has_token"] is True and "member-token" not in str(event.data)


@pytest.mark.parametrize(
    ("token", "words"),
    [
        ("no-such-token", "refused the credentials (401 Unauthorized)"),
        ("bare-token", "namespaces (get, list, watch, create, patch)"),
        ("narrow-token", "rayclusters.ray.io (delete); rayjobs.ray.io (delete)"),
    ],
)
def test_credentials_that_fail_the_check_save_nothing(
    root: Any, member_sim: KubeSim, token: str, words: str
) -> None:
    with pytest.raises(services.CredentialsRefused) as refused:
        register(root, member_sim, token=token)
    assert words in refused.value.messages[0], refused.value.messages
    assert not KubeCluster.objects.filter(name="onprem").exists()
    assert not AuditEvent.objects.unscoped().filter(action="kube_cluster.register").exists()


def test_an_unreachable_server_is_refused(root: Any, member_sim: KubeSim) -> None:
    url = member_sim.url
    member_sim.stop()
    with pytest.raises(services.CredentialsRefused) as refused:
        services.kube_cluster_register(actor=root, name="gone", server=url, token="member-token")
    assert refused.value.messages[0].startswith(f"Cannot reach {url}")


def test_a_missing_custom_resource_is_named(root: Any, settings: Any) -> None:
    sim = start_member_sim(absent_groups=("kueue.x-k8s.io",))
    try:
        register(root, sim)  # the built-in queue needs no Kueue
        settings.QUEUE_MODE = "kueue"
        with pytest.raises(services.CredentialsRefused) as refused:
            services.kube_cluster_register(
                actor=root, name="second", server=sim.url, token="member-token"
            )
    finally:
        sim.stop()
    assert "clusterqueues.kueue.x-k8s.io (Kueue)" in refused.value.messages[0]
    assert "rayjobs" not in refused.value.messages[0]


def test_only_platform_admins_register(alice: Any, member_sim: KubeSim) -> None:
    with pytest.raises(PermissionDenied):
        register(alice, member_sim)


def test_new_credentials_are_checked_sealed_and_move_credentials_changed_at(
    root: Any, member_sim: KubeSim
) -> None:
    member = register(root, member_sim)
    first = member.credentials_changed_at
    with pytest.raises(services.CredentialsRefused):
        services.kube_cluster_update(actor=root, member=member, changes={"token": "bare-token"})
    member.refresh_from_db()
    assert unseal(member.token_encrypted) == "member-token"
    assert member.credentials_changed_at == first
    services.kube_cluster_update(
        actor=root, member=member, changes={"token": "member-token", "placement_order": 5}
    )
    member.refresh_from_db()
    assert member.credentials_changed_at > first and member.placement_order == 5
    event = AuditEvent.objects.unscoped().get(action="kube_cluster.update")
    assert event.data["credentials_changed"] is True
    assert event.data["before"]["placement_order"] == 100


def test_cordon_and_uncordon_are_audited(root: Any, member_sim: KubeSim) -> None:
    member = register(root, member_sim)
    services.kube_cluster_set_schedulable(actor=root, member=member, schedulable="cordoned")
    assert KubeCluster.objects.get(pk=member.pk).schedulable == Schedulable.CORDONED
    services.kube_cluster_set_schedulable(actor=root, member=member, schedulable="active")
    actions = list(
        AuditEvent.objects.unscoped()
        .filter(action__startswith="kube_cluster.")
        .order_by("pk")
        .values_list("action", flat=True)
    )
    assert actions == ["kube_cluster.register", "kube_cluster.cordon", "kube_cluster.uncordon"]
    with pytest.raises(ValidationError):
        services.kube_cluster_set_schedulable(actor=root, member=member, schedulable="paused")


def test_a_member_with_requests_placed_on_it_is_not_removed(
    root: Any, member_sim: KubeSim, make_cluster: Any
) -> None:
    member = register(root, member_sim)
    row = make_cluster(state="running", kube_cluster=member)
    row.save()
    with pytest.raises(ServiceConflict, match="1 request\\(s\\) placed on it"):
        services.kube_cluster_remove(actor=root, member=member)
    ClusterRequest.objects.unscoped().filter(pk=row.pk).update(state="deleted")
    services.kube_cluster_remove(actor=root, member=member)
    assert not KubeCluster.objects.filter(name="onprem").exists()
    assert ClusterRequest.objects.unscoped().get(pk=row.pk).kube_cluster is None


def test_a_check_records_what_it_saw(root: Any, member_sim: KubeSim) -> None:
    member = register(root, member_sim)
    assert services.kube_cluster_check(actor=root, member=member).passed
    member_sim.stop()
    report = services.kube_cluster_check(actor=root, member=member)
    assert not report.passed and "Cannot reach" in report.message
    member.refresh_from_db()
    assert member.reachable is False and member.health_message == report.message
