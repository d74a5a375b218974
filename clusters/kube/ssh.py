"""The head's SSH convention (pure): the port and the Secret of accepted keys.

A cluster asked for with ``ssh: true`` gets, on its head container, a port named ``ssh``
(2222) and the Secret ``<cluster>-ssh`` mounted read-only at ``/etc/gangway/ssh`` (its
``authorized_keys``). The head's image runs an sshd on that port that reads that file;
kubesim starts a real one for such pods (kubesim/sshd.py). Tunnels reach the port
through ``pods/portforward`` only: no Service exposes it.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from clusters.kube import labels as lbl
from clusters.kube.manifests import Manifest, object_metadata

SSH_PORT = 2222
SSH_PORT_NAME = "ssh"
KEYS_VOLUME = "ssh-authorized-keys"
KEYS_FILE = "authorized_keys"
KEYS_MOUNT = "/etc/gangway/ssh"


def secret_name(cluster_name: str) -> str:
    """The name of a cluster's keys Secret."""
    return f"{cluster_name}-ssh"


def add_to_head(container: Manifest, pod_spec: Manifest, cluster_name: str) -> None:
    """Give the head container the SSH port and the keys Secret's mount."""
    container["ports"].append({"name": SSH_PORT_NAME, "containerPort": SSH_PORT, "protocol": "TCP"})
    container["volumeMounts"].append(
        {"name": KEYS_VOLUME, "mountPath": KEYS_MOUNT, "readOnly": True}
    )
    pod_spec["volumes"].append(
        {
            "name": KEYS_VOLUME,
            "secret": {"secretName": secret_name(cluster_name), "defaultMode": 0o440},
        }
    )


def keys_secret(cluster: Any, keys: Sequence[str]) -> Manifest:
    """The cluster's keys Secret: one ``authorized_keys`` line per accepted key."""
    text = "".join(f"{line}\n" for line in keys)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": object_metadata(
            secret_name(str(cluster.name)),
            lbl.cluster_labels(cluster),
            str(cluster.tenant.namespace),
        ),
        "type": "Opaque",
        "data": {KEYS_FILE: base64.b64encode(text.encode()).decode()},
    }
