"""Tunnels to a cluster's head through the product, on a real stack: the web server as
``make run`` starts it (uvicorn, ASGI), kubesim over HTTP with real local processes (its
SSH server for a head asked for with ``ssh: true``), the ``gangway`` CLI as a
subprocess, and OpenSSH's own ``ssh`` with ``gangway ssh --stdio`` as its ProxyCommand.
Refusals (another tenant, a plain member, a viewer, no token) and the audit rows too.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.utils import timezone
from knox.models import AuthToken
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from benchmarks.support import Processes, free_port, production_env, wait_http
from clusters.engine import provisioning
from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest, Tunnel
from kubesim import KubeSim
from scripts.run import web_command
from tenants import services
from tenants.models import AuditEvent, Role
from tests.clusters.engine.conftest import running_kubesim, wait_for
from tests.clusters.live.conftest import head_ready
from tests.factories import MembershipFactory, UserFactory
from tests.frontend.conftest import make_ready
from tests.kubesim.test_kubesim_sshd import keypair, ssh_argv

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH's ssh is not installed"),
]

GANGWAY = str(Path(sys.executable).with_name("gangway"))
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def kubesim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    """kubesim over HTTP with real processes behind pods (its sshd among them)."""
    with running_kubesim(tmp_path, settings, procs_root=str(tmp_path / "procs")) as sim:
        yield sim


@pytest.fixture
def bob_key(bob: Any, tmp_path: Path) -> Path:
    key = keypair(tmp_path, "bob")
    services.ssh_key_add(user=bob, public_key=(tmp_path / "bob.pub").read_text())
    return key


@pytest.fixture
def ssh_cluster(
    kubesim: KubeSim, bob: Any, bob_key: Path, request_cluster: Any, monkeypatch: Any
) -> ClusterRequest:
    """bob's dev cluster with ``ssh: true``, ready, its head and sshd running in kubesim."""
    from tests.frontend.browser import quiet_nudges

    quiet_nudges(monkeypatch)
    cluster = make_ready(request_cluster(bob, name="bob-ssh", ssh=True))
    ClusterRequest.objects.filter(pk=cluster.pk).update(ready_at=timezone.now())
    cluster = ClusterRequest.objects.select_related("tenant", "owner", "flavor").get(pk=cluster.pk)
    provisioning.apply_cluster(cluster, get_gateway())
    wait_for(lambda: head_ready(cluster), timeout=30, what="the head pod to be ready")
    head = get_gateway().list(
        "v1", "Pod", namespace=cluster.namespace, label_selector="ray.io/node-type=head"
    )[0]["metadata"]["name"]
    # Generous waits: on a loaded machine the sshd's interpreter takes its time to start.
    host, port = wait_for(
        lambda: kubesim.cluster.localprocs.address(cluster.namespace, head, 2222),
        timeout=120,
        what="the head's sshd",
    )
    wait_for(lambda: _accepts(host, port), timeout=120, what="the head's sshd to listen")
    return cluster


def _accepts(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError:
        return False
    return True


@pytest.fixture
def web(ssh_cluster: ClusterRequest, tmp_path: Path, settings: Any) -> Iterator[str]:
    """The product's URL: the web server as make run starts it, on the test's database."""
    db = django_settings.DATABASES["default"]
    database_url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    port = free_port()
    env = production_env(
        DATABASE_URL=database_url,
        KUBECONFIG=django_settings.KUBECONFIG,
        GANGWAY_VAR_DIR=str(tmp_path),
        LOG_LEVEL="INFO",
    )
    settings.SECRET_KEY = env["SECRET_KEY"]
    processes = Processes(tmp_path)
    processes.start("web", web_command(port), env)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        processes.stop()


def _token(user: Any) -> str:
    return AuthToken.objects.create(user=user)[1]


def cli_env(web: str, user: Any, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GANGWAY_")}
    env.update(
        GANGWAY_SERVER=web,
        GANGWAY_TOKEN=_token(user),
        GANGWAY_TENANT="acme",
        XDG_CONFIG_HOME=str(tmp_path / "xdg"),
        HOME=str(tmp_path),
    )
    return env


def test_ssh_with_gangway_as_proxycommand_runs_a_command_on_the_head(
    web: str, ssh_cluster: ClusterRequest, bob: Any, bob_key: Path, tmp_path: Path
) -> None:
    env = cli_env(web, bob, tmp_path)
    proxy = f"{GANGWAY} ssh --stdio bob-ssh"
    argv = ssh_argv(bob_key, tmp_path / "known_hosts", "-o", f"ProxyCommand={proxy}")
    done = subprocess.run(
        [*argv, "ray@bob-ssh", "echo hello from $(basename $(pwd))"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hello from sshd"

    # `gangway ssh CLUSTER COMMAND` runs ssh with the same ProxyCommand.
    again = subprocess.run(
        [
            GANGWAY,
            "ssh",
            "bob-ssh",
            "-i",
            str(bob_key),
            "--ssh-option",
            "BatchMode=yes",
            "--ssh-option",
            "StrictHostKeyChecking=accept-new",
            "--ssh-option",
            f"UserKnownHostsFile={tmp_path / 'known_hosts2'}",
            "--ssh-option",
            "IdentitiesOnly=yes",
            "uname -s",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "Linux"

    wait_for(
        lambda: Tunnel.objects.filter(cluster=ssh_cluster, closed_at__isnull=False).count() == 2,
        what="both tunnels closed",
    )
    tunnel = Tunnel.objects.filter(cluster=ssh_cluster).order_by("pk").first()
    assert tunnel is not None
    assert (tunnel.username, tunnel.port, tunnel.purpose) == ("bob", 2222, "ssh")
    assert tunnel.bytes_in > 0 and tunnel.bytes_out > 0
    opened = AuditEvent.objects.filter(action="tunnel.open", object_id=str(ssh_cluster.pk))
    closed = AuditEvent.objects.filter(action="tunnel.close", object_id=str(ssh_cluster.pk))
    assert opened.count() == 2 and closed.count() == 2
    row = closed.order_by("pk").first()
    assert row is not None and row.actor_name == "bob"
    assert row.data["port"] == 2222 and row.data["bytes_out"] == tunnel.bytes_out
    ssh_cluster.refresh_from_db()
    assert ssh_cluster.last_active_at is not None
    assert ssh_cluster.last_active_at >= tunnel.opened_at


def test_port_forward_relays_tcp_connections_to_the_head(
    web: str, ssh_cluster: ClusterRequest, bob: Any, tmp_path: Path
) -> None:
    local, refused_local = free_port(), free_port()
    forward = subprocess.Popen(
        [GANGWAY, "port-forward", "bob-ssh", f"{local}:8265", f"{refused_local}:9999"],
        env=cli_env(web, bob, tmp_path),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert forward.stderr is not None
        lines = [forward.stderr.readline(), forward.stderr.readline()]
        assert f"127.0.0.1:{local} -> bob-ssh:8265" in lines[0]
        # The dashboard port of a simulated head is kubesim's echo stand-in.
        with socket.create_connection(("127.0.0.1", local), timeout=30) as conn:
            conn.sendall(b"through the tunnel")
            assert conn.recv(100) == b"through the tunnel"
        # A port nothing listens on: the connection ends, and the CLI says why.
        with socket.create_connection(("127.0.0.1", refused_local), timeout=30) as conn:
            assert conn.recv(100) == b""
        said = forward.stderr.readline()
        assert "error forwarding port 9999" in said and "connection refused" in said
    finally:
        forward.terminate()
        forward.wait(timeout=10)
    wait_for(
        lambda: Tunnel.objects.filter(port=8265, closed_at__isnull=False).exists(),
        what="the tunnel closed",
    )
    assert Tunnel.objects.get(port=8265).purpose == "port-forward"


def _handshake(web: str, token: str | None, port: int = 2222) -> InvalidStatus | None:
    url = (
        web.replace("http://", "ws://")
        + f"/api/v1/tenants/acme/clusters/bob-ssh/tunnel/?port={port}"
    )
    headers = {"Authorization": f"Token {token}"} if token else {}
    try:
        with connect(url, additional_headers=headers, open_timeout=30):
            return None
    except InvalidStatus as refused:
        return refused


def test_only_the_owner_and_the_tenants_admins_open_tunnels(
    web: str, ssh_cluster: ClusterRequest, alice: Any, vera: Any, charlie: Any, tmp_path: Path
) -> None:
    dave = UserFactory(username="dave")
    MembershipFactory(tenant=ssh_cluster.tenant, user=dave, role=Role.ENGINEER)
    refused = {
        "nobody": _handshake(web, None),
        "charlie": _handshake(web, _token(charlie)),
        "dave": _handshake(web, _token(dave)),
        "vera": _handshake(web, _token(vera)),
    }
    statuses = {who: r.response.status_code if r else 101 for who, r in refused.items()}
    assert statuses == {"nobody": 401, "charlie": 404, "dave": 403, "vera": 403}
    dave_body = bytes(refused["dave"].response.body or b"").decode()  # type: ignore[union-attr]
    assert "Tunnels to bob-ssh are for its owner (bob) and the admins of Acme Research" in dave_body
    assert _handshake(web, _token(alice)) is None  # a tenant admin may
    assert not Tunnel.objects.filter(username__in=["charlie", "dave", "vera"]).exists()
    assert AuditEvent.objects.filter(action="tunnel.open", actor_name="alice").exists()

    # The CLI says the same, with its exit code for a refusal.
    done = subprocess.run(
        [GANGWAY, "ssh", "--stdio", "bob-ssh"],
        env=cli_env(web, dave, tmp_path),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 5
    assert "the tunnel was refused (403)" in done.stderr
