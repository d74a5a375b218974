"""A real SSH server (``asyncssh``) standing in for a pod's sshd: ``python -m kubesim.sshserver``.

Started by :mod:`kubesim.sshd`'s launcher. It accepts only the OpenSSH public keys in
``$KUBESIM_SSH_AUTHORIZED_KEYS`` (any user name), and runs each session's command, or a
shell, with ``/bin/sh`` in its working directory under kubesim's process root: the "pod's"
shell is the local machine's, as the user running kubesim, nothing contained. Port
forwarding from the session (``direct-tcpip``, as VS Code Remote-SSH uses) reaches loopback
only; SFTP is served. Nothing in the package imports this module (see :mod:`kubesim.sshd`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from kubesim.sshd import KEYS_ENV


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
            env=_session_env(),
        )
        await process.redirect(stdin=child.stdin, stdout=child.stdout, stderr=child.stderr)
        status = await child.wait()
        await process.stdout.drain()
        await process.stderr.drain()
    except (OSError, asyncssh.Error) as exc:
        process.stderr.write(f"kubesim sshd: {exc}\n")
        status = 255
    process.exit(status)
    # The redirect's writers finish when the channel closes; awaited here, or their
    # coroutines are collected unawaited (a RuntimeWarning in the pod's log).
    await process.wait_closed()


def _session_env() -> dict[str, str]:
    """The session's environment: the server's, with the Python that runs the pod first on
    ``PATH``, as a Ray image's shell finds its ``python`` and ``ray`` first."""
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}


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
    parser = argparse.ArgumentParser(prog="python -m kubesim.sshserver")
    parser.add_argument("--port", type=int, required=True, help="loopback port to listen on")
    parser.add_argument("--host-key", default="host_key", help="host key file (made if absent)")
    args = parser.parse_args(argv)
    keys = os.environ.get(KEYS_ENV, "")
    asyncio.run(_serve(args.port, keys, Path(args.host_key)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
