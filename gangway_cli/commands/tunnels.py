"""``port-forward``, ``ssh`` and ``ssh-key``: reaching a cluster's head from here.

Each TCP connection is one WebSocket to the cluster's tunnel route
(``/api/v1/tenants/{t}/clusters/{name}/tunnel/?port=N``): binary messages carry the
connection's bytes, a text message is the server's word on why it ends. ``gangway ssh``
runs OpenSSH's ``ssh`` with itself as the ProxyCommand (``gangway ssh --stdio``), so
``ssh``, ``scp`` and VS Code Remote-SSH work with the same line in ~/.ssh/config.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import socket
import sys
import threading
from pathlib import Path
from typing import Annotated, Any, BinaryIO
from urllib.parse import urlsplit, urlunsplit

import typer
from websockets.exceptions import ConnectionClosed, InvalidStatus, InvalidURI
from websockets.sync.client import ClientConnection, connect

from gangway_cli import exitcodes, output
from gangway_cli.app import OutputOpt, ServerOpt, Session, TenantOpt, app, session
from gangway_cli.errors import CliError

SSH_PORT = 2222
SSH_USER = "ray"
CHUNK = 64 * 1024

key_app = typer.Typer(
    help="Your SSH public keys: clusters asked for with --ssh accept them.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(key_app, name="ssh-key")


def _tunnel_url(s: Session, cluster: str, port: int, purpose: str) -> str:
    parts = urlsplit(s.client.server)
    scheme = "wss" if parts.scheme == "https" else "ws"
    path = f"{parts.path.rstrip('/')}{s.tenant_path(f'clusters/{cluster}/tunnel/')}"
    return urlunsplit((scheme, parts.netloc, path, f"port={port}&purpose={purpose}", ""))


def open_tunnel(s: Session, cluster: str, port: int, purpose: str) -> ClientConnection:
    """One WebSocket to ``port`` of the cluster's head; a refusal is a :class:`CliError`
    with the server's message."""
    headers = {**s.client._authorization(), "User-Agent": "gangway-cli"}
    try:
        return connect(
            _tunnel_url(s, cluster, port, purpose),
            additional_headers=headers,
            compression=None,
            max_size=None,
            open_timeout=30,
        )
    except InvalidStatus as refused:
        raise _refusal(refused) from None
    except (OSError, TimeoutError, InvalidURI) as exc:
        raise CliError(
            f"could not reach {s.client.server}: {exc}", code=exitcodes.UNREACHABLE
        ) from None


def _refusal(refused: InvalidStatus) -> CliError:
    status = refused.response.status_code
    body = bytes(refused.response.body or b"")
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = body.decode(errors="replace") or f"HTTP {status}"
    code = {401: exitcodes.AUTH, 404: exitcodes.NOT_FOUND}.get(status, exitcodes.REFUSED)
    return CliError(f"the tunnel was refused ({status}): {message}", code=code)


def _pump_out(ws: ClientConnection, write: Any, ended: Any) -> None:
    """WebSocket to ``write`` (binary) and stderr (the server's text); ``ended()`` once
    it ends, so that the other direction stops waiting for input."""
    try:
        for message in ws:
            if isinstance(message, str):
                print(f"gangway: {message}", file=sys.stderr, flush=True)
            else:
                write(message)
    except (ConnectionClosed, OSError):
        pass
    finally:
        ended()


def relay_socket(ws: ClientConnection, conn: socket.socket) -> None:
    """Relay one accepted TCP connection through ``ws`` until either side ends."""

    def ended() -> None:
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)  # wakes the read below

    out = threading.Thread(target=_pump_out, args=(ws, conn.sendall, ended), daemon=True)
    out.start()
    try:
        while data := conn.recv(CHUNK):
            ws.send(data)
    except (ConnectionClosed, OSError):
        pass
    finally:
        ws.close()
        out.join(timeout=5)
        conn.close()


def relay_stdio(ws: ClientConnection, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Relay standard input and output through ``ws`` (ssh's ProxyCommand). When the
    server ends the connection the process ends, as ssh expects of a ProxyCommand."""

    def write(data: bytes) -> None:
        stdout.write(data)
        stdout.flush()

    def ended() -> None:
        sys.stderr.flush()
        os._exit(0)

    threading.Thread(target=_pump_out, args=(ws, write, ended), daemon=True).start()
    try:
        while data := os.read(stdin.fileno(), CHUNK):
            ws.send(data)
    except (ConnectionClosed, OSError):
        pass
    finally:
        ws.close()
        threading.Event().wait(5)  # the server's close ends the process (ended)


def _mapping(text: str) -> tuple[int, int]:
    local, _, remote = text.partition(":")
    try:
        ports = (int(local or 0), int(remote or local)) if remote else (int(local), int(local))
    except ValueError:
        raise CliError(
            f"not a port mapping: {text!r}", hint="use LOCAL:REMOTE, e.g. 8265:8265"
        ) from None
    if not all(0 <= p < 65536 for p in ports) or ports[1] == 0:
        raise CliError(f"not a port mapping: {text!r}", hint="ports are 1-65535 (local 0: any)")
    return ports


def _ready_cluster(s: Session, cluster: str) -> dict[str, Any]:
    found: dict[str, Any] = s.client.get(s.tenant_path(f"clusters/{cluster}/"))
    if found.get("state") != "ready":
        raise CliError(
            f"{cluster} is {found.get('state')}: tunnels open to ready clusters only",
            hint=f"gangway status {cluster}",
            code=exitcodes.REFUSED,
        )
    return found


@app.command("port-forward")
def port_forward(
    ctx: typer.Context,
    cluster: Annotated[str, typer.Argument(help="The cluster's name.")],
    mappings: Annotated[
        list[str], typer.Argument(help="LOCAL:REMOTE ports, e.g. 8265:8265 10001:10001.")
    ],
    address: Annotated[str, typer.Option(help="Local address to listen on.")] = "127.0.0.1",
    tenant: TenantOpt = None,
    output_option: OutputOpt = None,
) -> None:
    """Forward local ports to ports of the cluster's head, until Ctrl-C."""
    s = session(ctx, output_option, tenant=tenant)
    pairs = [_mapping(m) for m in mappings]
    _ready_cluster(s, cluster)
    listeners = []
    for local, remote in pairs:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, local))
        except OSError as exc:
            raise CliError(f"cannot listen on {address}:{local}: {exc}") from None
        sock.listen(16)
        listeners.append((sock, remote))
        bound = sock.getsockname()[1]
        output.stderr.print(f"Forwarding {address}:{bound} -> {cluster}:{remote}")

    def serve(listener: socket.socket, remote: int) -> None:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=_one, args=(conn, remote), daemon=True).start()

    def _one(conn: socket.socket, remote: int) -> None:
        try:
            ws = open_tunnel(s, cluster, remote, "port-forward")
        except CliError as error:
            print(f"gangway: {error.message}", file=sys.stderr, flush=True)
            conn.close()
            return
        relay_socket(ws, conn)

    for listener, remote in listeners:
        threading.Thread(target=serve, args=(listener, remote), daemon=True).start()
    threading.Event().wait()


@app.command("ssh")
def ssh(
    ctx: typer.Context,
    cluster: Annotated[str, typer.Argument(help="The cluster's name.")],
    command: Annotated[
        list[str] | None, typer.Argument(help="A command to run instead of a shell.")
    ] = None,
    stdio: Annotated[
        bool,
        typer.Option(
            "--stdio", help="Pipe standard input and output to the head's SSH port (ProxyCommand)."
        ),
    ] = False,
    user: Annotated[str, typer.Option("--user", "-l", help="The user to log in as.")] = SSH_USER,
    identity: Annotated[
        Path | None, typer.Option("--identity", "-i", help="Private key file for ssh.")
    ] = None,
    ssh_option: Annotated[
        list[str] | None,
        typer.Option("--ssh-option", help="An option for ssh, as its -o takes (repeatable)."),
    ] = None,
    server: ServerOpt = None,
    tenant: TenantOpt = None,
    output_option: OutputOpt = None,
) -> None:
    """Open a shell (or run COMMAND) on the cluster's head over SSH, through gangway.

    Run by ssh as its ProxyCommand (``--stdio``, or when neither standard input nor
    output is a terminal), it only carries the connection."""
    s = session(ctx, output_option, tenant=tenant, server=server)
    piped = not sys.stdin.isatty() and not sys.stdout.isatty()
    if stdio or (piped and not command):
        ws = open_tunnel(s, cluster, SSH_PORT, "ssh")
        relay_stdio(ws, sys.stdin.buffer, sys.stdout.buffer)
        return
    found = _ready_cluster(s, cluster)
    if not found.get("ssh"):
        raise CliError(
            f"{cluster} was not created with SSH",
            hint="request one with `gangway up --ssh` (and add your key: gangway ssh-key add)",
            code=exitcodes.REFUSED,
        )
    binary = shutil.which("ssh")
    if binary is None:
        raise CliError("OpenSSH's ssh is not installed", hint="install openssh-client")
    argv = ssh_argv(s, cluster, user=user, identity=identity, command=command or [])
    for option in ssh_option or []:
        argv[1:1] = ["-o", option]
    os.execv(binary, argv)


def proxy_command(s: Session, cluster: str) -> str:
    """The ProxyCommand line that reaches ``cluster`` (for ssh -o and ~/.ssh/config)."""
    me = shlex.quote(sys.argv[0] if sys.argv and sys.argv[0].endswith("gangway") else "gangway")
    return (
        f"{me} ssh --stdio --server {shlex.quote(s.client.server)} "
        f"--tenant {shlex.quote(s.tenant())} {shlex.quote(cluster)}"
    )


def ssh_argv(
    s: Session, cluster: str, *, user: str, identity: Path | None, command: list[str]
) -> list[str]:
    """The ssh command line ``gangway ssh CLUSTER`` runs."""
    argv = ["ssh", "-o", f"ProxyCommand={proxy_command(s, cluster)}"]
    argv += ["-o", f"HostKeyAlias=gangway-{s.tenant()}-{cluster}"]
    if identity is not None:
        argv += ["-i", str(identity)]
    return [*argv, f"{user}@{cluster}", *command]


@key_app.command("list")
def key_list(ctx: typer.Context, output_option: OutputOpt = None) -> None:
    """Your SSH public keys."""
    s = session(ctx, output_option)
    keys = s.client.get_all("/api/v1/users/me/ssh-keys/")

    def show() -> None:
        if not keys:
            output.stdout.print("No SSH keys yet: gangway ssh-key add ~/.ssh/id_ed25519.pub")
            return
        rows = [(k["id"], k["name"], k["fingerprint"], output.when(k["created_at"])) for k in keys]
        output.stdout.print(output.table(["ID", "NAME", "FINGERPRINT", "ADDED"], rows))

    output.emit(s.mode, keys, show)


@key_app.command("add")
def key_add(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument(help="Public key file (.pub), or - for stdin.")],
    name: Annotated[str, typer.Option(help="A name for it (default: its comment).")] = "",
    output_option: OutputOpt = None,
) -> None:
    """Add an SSH public key to your profile."""
    s = session(ctx, output_option)
    try:
        text = sys.stdin.read() if path == "-" else Path(path).expanduser().read_text()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc}", code=exitcodes.USAGE) from None
    key = s.client.post("/api/v1/users/me/ssh-keys/", {"public_key": text.strip(), "name": name})
    output.emit(
        s.mode, key, lambda: output.stdout.print(f"Added {key['name']} {key['fingerprint']}")
    )


@key_app.command("remove")
def key_remove(
    ctx: typer.Context,
    key_id: Annotated[int, typer.Argument(help="The key's ID (gangway ssh-key list).")],
    output_option: OutputOpt = None,
) -> None:
    """Remove one of your SSH public keys."""
    s = session(ctx, output_option)
    s.client.delete(f"/api/v1/users/me/ssh-keys/{key_id}/")
    output.emit(s.mode, {"removed": key_id}, lambda: output.stdout.print(f"Removed key {key_id}"))
