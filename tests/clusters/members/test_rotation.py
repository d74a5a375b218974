"""Rotating the fleet's credential key: sealed with A, rotated under [B, A], still opened
under [B] alone."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import PermissionDenied

from clusters.kube.connection import kubeconfig_of
from clusters.members import services
from clusters.models import KubeCluster
from controlplane.exceptions import ServiceConflict
from controlplane.sealed import UnsealError, unseal
from kubesim import KubeSim


def test_rotation_reseals_every_secret_with_the_first_key(
    root: Any, member_sim: KubeSim, settings: Any
) -> None:
    a, b = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.FLEET_CREDENTIAL_KEYS = [a]
    services.kube_cluster_register(
        actor=root, name="onprem", server=member_sim.url, token="member-token"
    )
    sealed_with_a = KubeCluster.objects.get(name="onprem").token_encrypted
    settings.FLEET_CREDENTIAL_KEYS = [b]
    with pytest.raises(UnsealError):
        unseal(sealed_with_a)

    settings.FLEET_CREDENTIAL_KEYS = [b, a]
    assert services.kube_cluster_rotate_keys(actor=root) == 1

    settings.FLEET_CREDENTIAL_KEYS = [b]
    member = KubeCluster.objects.get(name="onprem")
    assert member.token_encrypted != sealed_with_a
    assert kubeconfig_of(member)["users"][0]["user"]["token"] == "member-token"  # type: ignore[index]
    assert services.kube_cluster_check(actor=root, member=member).passed


def test_rotation_without_the_old_key_changes_nothing(
    root: Any, member_sim: KubeSim, settings: Any
) -> None:
    settings.FLEET_CREDENTIAL_KEYS = [Fernet.generate_key().decode()]
    services.kube_cluster_register(
        actor=root, name="onprem", server=member_sim.url, token="member-token"
    )
    before = KubeCluster.objects.get(name="onprem").token_encrypted
    settings.FLEET_CREDENTIAL_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(ServiceConflict, match="No configured key opens the credentials of onprem"):
        services.kube_cluster_rotate_keys(actor=root)
    assert KubeCluster.objects.get(name="onprem").token_encrypted == before


def test_only_platform_admins_rotate(alice: Any) -> None:
    with pytest.raises(PermissionDenied):
        services.kube_cluster_rotate_keys(actor=alice)


def test_a_change_whose_kept_secret_no_key_opens_is_a_400_not_a_crash(
    root: Any, member_sim: KubeSim, settings: Any
) -> None:
    settings.FLEET_CREDENTIAL_KEYS = [Fernet.generate_key().decode()]
    member = services.kube_cluster_register(
        actor=root, name="onprem", server=member_sim.url, token="member-token"
    )
    settings.FLEET_CREDENTIAL_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(services.CredentialsRefused, match="give them again"):
        services.kube_cluster_update(actor=root, member=member, changes={"server": member_sim.url})
    services.kube_cluster_update(actor=root, member=member, changes={"token": "member-token"})
    assert unseal(KubeCluster.objects.get(name="onprem").token_encrypted) == "member-token"
