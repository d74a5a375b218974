"""The launcher of the real SSH server standing in for a pod's sshd (:mod:`kubesim.sshserver`).

The convention gangway's manifests follow (and any pod may): a container port named
``ssh`` is the sshd's, and the pod's volume ``ssh-authorized-keys`` is a Secret whose
``authorized_keys`` key holds the OpenSSH public keys it accepts. For such a pod, once it
runs, :func:`launcher` asks for one process (``python -m kubesim.sshserver``, which says
what it serves) on a loopback port standing for that port. The server lives in a module
of its own, which nothing in the package imports: ``python -m`` of a module the package
has already imported runs a second copy of it, and runpy says so on stderr (a
``RuntimeWarning`` in the pod's log).
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from kubesim.localproc import ProcessSpec, free_port, python_module
from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

PORT_NAME = "ssh"
KEYS_VOLUME = "ssh-authorized-keys"
KEYS_FILE = "authorized_keys"
KEYS_ENV = "KUBESIM_SSH_AUTHORIZED_KEYS"
SSHD_MEMORY_BYTES = 256 << 20


def _ssh_port(pod: Obj) -> int | None:
    for container in get_path(pod, "spec", "containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == PORT_NAME and "containerPort" in port:
                return int(port["containerPort"])
    return None


def authorized_keys(cluster: ClusterView, pod: Obj) -> str | None:
    """The ``authorized_keys`` text of the pod's keys Secret; None when the pod names no
    such volume, or the Secret or its key is missing (a real pod would not start)."""
    ns = pod["metadata"]["namespace"]
    for volume in get_path(pod, "spec", "volumes") or []:
        if volume.get("name") != KEYS_VOLUME or not get_path(volume, "secret", "secretName"):
            continue
        secret = cluster.store.get("secrets", ns, volume["secret"]["secretName"])
        data = (secret or {}).get("data") or {}
        if KEYS_FILE in data:
            try:
                return base64.b64decode(data[KEYS_FILE]).decode()
            except (binascii.Error, UnicodeDecodeError):
                return None
        text = ((secret or {}).get("stringData") or {}).get(KEYS_FILE)
        return str(text) if text is not None else None
    return None


def launcher(cluster: ClusterView, pod: Obj) -> list[ProcessSpec]:
    """The sshd a running pod wants under the convention above (none otherwise)."""
    port = _ssh_port(pod)
    if port is None:
        return []
    keys = authorized_keys(cluster, pod)
    if keys is None:
        return []
    local = free_port()
    argv, env = python_module("kubesim.sshserver", "--port", str(local))
    env[KEYS_ENV] = keys
    return [ProcessSpec("sshd", argv, env=env, ports={port: local}, memory_bytes=SSHD_MEMORY_BYTES)]
