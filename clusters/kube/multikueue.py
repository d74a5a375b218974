"""MultiKueue's objects on the manager cluster: pure, members in, dicts out.

Per worker: a kubeconfig Secret in Kueue's namespace and a ``MultiKueueCluster`` named as
the member (so a Workload's ``status.clusterName`` is a member's name). Per tenant: a
``MultiKueueConfig`` listing the workers it may use, in placement order, and the
``AdmissionCheck`` (controller ``kueue.x-k8s.io/multikueue``) its ClusterQueue runs.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clusters.kube import labels as lbl
from clusters.kube.queues import KUEUE_API

Manifest = dict[str, Any]

CONTROLLER = "kueue.x-k8s.io/multikueue"
# Kueue's own namespace (its default install), where MultiKueue reads the Secrets.
KUEUE_NAMESPACE = "kueue-system"
SECRET_KEY = "kubeconfig"
# Kueue refuses a config without clusters (minItems 1): a tenant no worker is open to
# keeps its check, which then names a missing config, so Kueue admits nothing for it.
MAX_CLUSTERS = 20


def secret_name(member: str) -> str:
    """The Secret holding the kubeconfig MultiKueue signs in to worker ``member`` with."""
    return f"gangway-multikueue-{member}"


def check_name(tenant: Any) -> str:
    """A tenant's MultiKueue AdmissionCheck (its config has the same name)."""
    return f"gangway-multikueue-{tenant.namespace}"


def kubeconfig_secret(member: str, kubeconfig: Mapping[str, Any]) -> Manifest:
    """The Secret with ``member``'s kubeconfig under the key MultiKueue reads."""
    text = json.dumps(kubeconfig, sort_keys=True)  # JSON is YAML, which Kueue loads
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name(member),
            "namespace": KUEUE_NAMESPACE,
            "labels": {lbl.MANAGED_BY: lbl.MANAGER},
        },
        "type": "Opaque",
        "data": {SECRET_KEY: base64.b64encode(text.encode()).decode()},
    }


def multikueue_cluster(member: str) -> Manifest:
    """The ``MultiKueueCluster`` of worker ``member``, reading its Secret."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "MultiKueueCluster",
        "metadata": {"name": member, "labels": {lbl.MANAGED_BY: lbl.MANAGER}},
        "spec": {
            "clusterSource": {
                "kubeConfig": {"locationType": "Secret", "location": secret_name(member)}
            }
        },
    }


def tenant_check(tenant: Any, workers: Sequence[str]) -> list[Manifest]:
    """A tenant's AdmissionCheck and, when some worker is open to it, its
    ``MultiKueueConfig`` listing ``workers`` in order (the first 20: Kueue's limit)."""
    name = check_name(tenant)
    check = {
        "apiVersion": KUEUE_API,
        "kind": "AdmissionCheck",
        "metadata": {"name": name, "labels": lbl.tenant_labels(tenant)},
        "spec": {
            "controllerName": CONTROLLER,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": name},
        },
    }
    if not workers:
        return [check]
    config = {
        "apiVersion": KUEUE_API,
        "kind": "MultiKueueConfig",
        "metadata": {"name": name, "labels": lbl.tenant_labels(tenant)},
        "spec": {"clusters": list(workers)[:MAX_CLUSTERS]},
    }
    return [config, check]


def manager_objects(
    kubeconfigs: Mapping[str, Mapping[str, Any]], configs: Iterable[tuple[Any, Sequence[str]]]
) -> list[Manifest]:
    """Every MultiKueue object of the manager, in apply order: ``kubeconfigs`` per
    worker name, ``configs`` the tenants with the workers each may be dispatched to."""
    objects: list[Manifest] = []
    for member in sorted(kubeconfigs):
        objects.append(kubeconfig_secret(member, kubeconfigs[member]))
        objects.append(multikueue_cluster(member))
    for tenant, workers in sorted(configs, key=lambda tw: str(tw[0].slug)):
        objects += tenant_check(tenant, workers)
    return objects
