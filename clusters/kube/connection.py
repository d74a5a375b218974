"""How gangway reaches each Kubernetes cluster of the fleet: a kubeconfig built from a
:class:`~clusters.models.KubeCluster` row (its credentials unsealed) and one gateway per
member and process, rebuilt when the member's credentials change."""

from __future__ import annotations

import base64
import os
import threading
from typing import Any

from django.conf import settings

from clusters.kube.gateway import Gateway, build_gateway, get_gateway, own_gateway
from clusters.models import ClusterRequest, KubeCluster
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
            gateway.member = member.name
            cached = _gateways[member.name] = (key, gateway)
        return cached[1]


def own_gateway_for(member: KubeCluster) -> Gateway:
    """A gateway to ``member`` with its own connections, for a watch that holds one."""
    if member.from_settings:
        return own_gateway()
    gateway = build_gateway(kubeconfig_of(member), source=f"cluster {member.name}")
    gateway.member = member.name
    return gateway


# The home member comes first in this order.
HOME_FIRST = ("-from_settings", "placement_order", "name")


def home_member() -> KubeCluster | None:
    """The member a row not placed by admission runs on: the one settings bootstraps,
    else the first in placement order; ``None`` when no member is registered (then
    settings' cluster is the only one)."""
    return KubeCluster.objects.order_by(*HOME_FIRST).first()


def member_of(request: ClusterRequest) -> KubeCluster | None:
    """The member ``request`` is placed on (:func:`home_member` while it has none)."""
    if request.kube_cluster_id is None:
        return home_member()
    return request.kube_cluster


def gateway_of(request: ClusterRequest) -> Gateway:
    """The gateway to the member ``request`` is placed on (settings' without members)."""
    member = member_of(request)
    return get_gateway() if member is None else gateway_for(member)


def placed_gateways(requests: list[ClusterRequest]) -> dict[int, Gateway]:
    """The gateway of each request, by id, with the members read in one query: a batch
    spans few members and many rows."""
    ids = {r.kube_cluster_id for r in requests if r.kube_cluster_id is not None}
    members = KubeCluster.objects.in_bulk(ids) if ids else {}
    home: Gateway | None = None
    found: dict[int, Gateway] = {}
    for request in requests:
        member = members.get(request.kube_cluster_id) if request.kube_cluster_id else None
        if member is not None:
            found[request.pk] = gateway_for(member)
            continue
        if home is None:
            first = home_member()
            home = get_gateway() if first is None else gateway_for(first)
        found[request.pk] = home
    return found


def on_unreachable(requests: list[ClusterRequest]) -> set[int]:
    """The ids of ``requests`` placed on a member marked unreachable (one query)."""
    ids = {r.kube_cluster_id for r in requests if r.kube_cluster_id is not None}
    if not ids:
        return set()
    down = set(KubeCluster.objects.filter(pk__in=ids, reachable=False).values_list("pk", flat=True))
    return {r.pk for r in requests if r.kube_cluster_id in down}


def ping() -> None:
    """Raise unless the Kubernetes API of settings' cluster answers ``/version``."""
    get_gateway().version()
