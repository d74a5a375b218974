"""How gangway reaches each Kubernetes cluster of the fleet: a kubeconfig built from a
:class:`~clusters.models.KubeCluster` row (its credentials unsealed) and one gateway per
member and process, rebuilt when the member's credentials change."""

from __future__ import annotations

import base64
import os
import threading
from typing import Any

from django.conf import settings

from clusters.kube.gateway import Gateway, build_gateway, get_gateway
from clusters.models import KubeCluster
from controlplane.sealed import unseal

_lock = threading.Lock()
_gateways: dict[str, tuple[tuple[Any, ...], Gateway]] = {}


def kubeconfig_of(member: KubeCluster) -> dict[str, Any] | str:
    """The kubeconfig to sign in to ``member`` with: settings' (a path, or "" for the
    pod's service account) for the member that bootstraps from settings, else a
    kubeconfig dict with its server, CA and unsealed token or client certificate."""
    if member.from_settings:
        return str(settings.KUBECONFIG)
    cluster: dict[str, Any] = {"server": member.server}
    if member.insecure_skip_tls_verify:
        cluster["insecure-skip-tls-verify"] = True
    elif member.ca_data:
        cluster["certificate-authority-data"] = _b64(member.ca_data)
    user: dict[str, Any] = {}
    if member.token_encrypted:
        user["token"] = unseal(member.token_encrypted)
    if member.client_certificate:
        user["client-certificate-data"] = _b64(member.client_certificate)
        user["client-key-data"] = _b64(unseal(member.client_key_encrypted))
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": member.name, "cluster": cluster}],
        "users": [{"name": member.name, "user": user}],
        "contexts": [
            {"name": member.name, "context": {"cluster": member.name, "user": member.name}}
        ],
        "current-context": member.name,
    }


def _b64(pem: str) -> str:
    return base64.b64encode(pem.encode()).decode()


def gateway_for(member: KubeCluster) -> Gateway:
    """The process's gateway to ``member``: the settings' own for the member that
    bootstraps from settings, else one built from its credentials, rebuilt when they
    change (``credentials_changed_at``) and in a forked child."""
    if member.from_settings:
        return get_gateway()
    key = (member.server, member.credentials_changed_at, os.getpid())
    with _lock:
        cached = _gateways.get(member.name)
        if cached is None or cached[0] != key:
            gateway = build_gateway(kubeconfig_of(member), source=f"cluster {member.name}")
            cached = _gateways[member.name] = (key, gateway)
        return cached[1]


def own_gateway_for(member: KubeCluster) -> Gateway:
    """A gateway to ``member`` with its own connections, for a watch that holds one."""
    return build_gateway(kubeconfig_of(member), source=f"cluster {member.name}")


def ping() -> None:
    """Raise unless the Kubernetes API of settings' cluster answers ``/version``."""
    get_gateway().version()
