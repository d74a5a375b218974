"""A real SSH server standing in for a pod's sshd (``asyncssh``), and its launcher.

The convention gangway's manifests follow (and any pod may): a container port named
``ssh`` is the sshd's, and the pod's volume ``ssh-authorized-keys`` is a Secret whose
``authorized_keys`` key holds the OpenSSH public keys it accepts. For such a pod, once it
runs, :func:`launcher` asks for one process (``python -m kubesim.sshd``) serving that port
on loopback. It accepts only those keys (any user name), and runs each session's command,
or a shell, with ``/bin/sh`` in its working directory under kubesim's process root: the
"pod's" shell is the local machine's, as the user running kubesim, nothing contained.
Port forwarding from the session (``direct-tcpip``, as VS Code Remote-SSH uses) reaches
loopback only; SFTP is served.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    argv, env = python_module("kubesim.sshd", "--port", str(local))
    env[KEYS_ENV] = keys
    return [ProcessSpec("sshd", argv, env=env, ports={port: local}, memory_bytes=SSHD_MEMORY_BYTES)]


# -- the server process ---------------------------------------------------------------


async def _session(process: Any) -> None:
    """One session: its command (or a shell) under /bin/sh, here, its exit status back."""
    import asyncssh

    command = process.command
    argv = ["/bin/sh", "-c", command] if command else ["/bin/sh", "-i"]
    try:
        child = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=os.getcwd(),
        )
        await process.redirect(stdin=child.stdin, stdout=child.stdout, stderr=child.stderr)
        status = await child.wait()
        await process.stdout.drain()
        await process.stderr.drain()
    except (OSError, asyncssh.Error) as exc:
        process.stderr.write(f"kubesim sshd: {exc}\n")
        status = 255
    process.exit(status)


def _server_class() -> Any:
    import asyncssh

    class Server(asyncssh.SSHServer):  # type: ignore[misc]
        """Public keys only; direct TCP to loopback only."""

        def password_auth_supported(self) -> bool:
            return False

        def connection_requested(self, dest_host: str, dest_port: int, *_: Any) -> bool:
            return dest_host in ("127.0.0.1", "localhost", "::1")

    return Server


async def _serve(port: int, keys: str, host_key_path: Path) -> None:
    import asyncssh

    if not host_key_path.exists():
        host_key_path.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key())
        host_key_path.chmod(0o600)
    server = await asyncssh.listen(
        "127.0.0.1",
        port,
        server_factory=_server_class(),
        server_host_keys=[str(host_key_path)],
        authorized_client_keys=asyncssh.import_authorized_keys(keys),
        process_factory=_session,
        sftp_factory=True,
        allow_scp=True,
        encoding=None,
    )
    await server.wait_closed()


def main(argv: list[str] | None = None) -> int:
    """Serve until killed (kubesim stops the process with its pod)."""
    parser = argparse.ArgumentParser(prog="python -m kubesim.sshd")
    parser.add_argument("--port", type=int, required=True, help="loopback port to listen on")
    parser.add_argument("--host-key", default="host_key", help="host key file (made if absent)")
    args = parser.parse_args(argv)
    keys = os.environ.get(KEYS_ENV, "")
    asyncio.run(_serve(args.port, keys, Path(args.host_key)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
