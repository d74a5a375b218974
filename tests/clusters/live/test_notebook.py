"""JupyterLab on a cluster's head, for real, through the product (``notebook_stack.py``).

bob asks for a dev cluster with a notebook; kubesim runs a real ``jupyter lab`` behind its
head pod; the product relays it on the clusters' origin. In Chromium, bob opens it from
the cluster's page, starts a Python kernel (its WebSocket through the proxy) and runs
code. Through Jupyter's REST API and kernel WebSocket, the same path with ``requests``
and ``websockets``: Jupyter's XSRF check still holds behind the proxy, and a busy kernel
is what keeps the cluster from going idle, as its page says.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Subprotocol

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from clusters.engine import idle
from clusters.models import ClusterRequest
from tests.clusters.engine.conftest import wait_for
from tests.clusters.live.notebook_stack import (
    NAME,
    Stack,
    notebook_stack,
    real_ray_notebook_stack,
    signed_in,
)

__all__ = ["notebook_stack", "real_ray_notebook_stack"]

# Real Ray heads share one xdist worker (`--dist loadgroup`): one at a time on two cores.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("real-ray")]

SCREENSHOTS = Path(os.environ.get("GANGWAY_SCREENSHOTS_DIR", "docs/screenshots"))


def _opened(stack: Stack, username: str) -> requests.Session:
    """``username`` signed in, having followed "Open JupyterLab" to the lab's page."""
    session = signed_in(stack, username)
    lab = session.get(f"{stack.product}/t/acme/clusters/{NAME}/notebook/", timeout=60)
    assert lab.status_code == 200, lab.text[:300]
    assert lab.url == stack.notebook + "lab"
    assert "JupyterLab" in lab.text
    return session


def _cookie(session: requests.Session, name: str) -> str:
    return next(c.value for c in session.cookies if c.name == name and c.value is not None)


def _writes(stack: Stack, session: requests.Session) -> dict[str, str]:
    """What JupyterLab's page sends with a write: its origin and the XSRF token."""
    return {"Origin": stack.origin, "X-XSRFToken": _cookie(session, "_xsrf")}


# JupyterLab's own kernel protocol in a browser: binary frames, asked for by subprotocol.
V1 = "v1.kernel.websocket.jupyter.org"


def _kernel_socket(
    stack: Stack, session: requests.Session, kernel: str, *, subprotocol: str | None = None
) -> ClientConnection:
    cookies = "; ".join(f"{n}={_cookie(session, n)}" for n in ("gangway_ray", "_xsrf"))
    url = stack.notebook.replace("http://", "ws://") + f"api/kernels/{kernel}/channels"
    return connect(
        f"{url}?session_id={uuid.uuid4().hex}",
        additional_headers={"Cookie": cookies},
        origin=stack.origin,  # type: ignore[arg-type]
        subprotocols=[Subprotocol(subprotocol)] if subprotocol else None,
        open_timeout=30,
    )


def _output_v1(ws: ClientConnection, code: str) -> str:
    """:func:`_execute` and :func:`_output` in the v1 protocol, packed and unpacked by
    Jupyter Server's own functions; every message the kernel sends must arrive binary."""
    from jupyter_server.services.kernels.connection.base import (
        deserialize_msg_from_ws_v1,
        serialize_msg_to_ws_v1,
    )

    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "msg_type": "execute_request", "version": "5.3"}
    content = {"code": code, "silent": False, "store_history": False, "allow_stdin": False}
    parts = [{**header, "session": "test", "username": "bob"}, {}, {}, content]
    ws.send(serialize_msg_to_ws_v1([json.dumps(p).encode() for p in parts], "shell"))
    out = []
    while True:
        frame = ws.recv(timeout=60)
        assert isinstance(frame, bytes), frame[:200]
        _, (head, parent, _meta, body, *_) = deserialize_msg_from_ws_v1(frame)
        if json.loads(parent).get("msg_id") != msg_id:
            continue
        msg_type, message = json.loads(head)["msg_type"], json.loads(body)
        if msg_type == "stream":
            out.append(message["text"])
        if msg_type == "status" and message["execution_state"] == "idle":
            return "".join(out)


def _execute(ws: ClientConnection, code: str) -> str:
    """Send an ``execute_request`` (Jupyter's messaging protocol, JSON over the socket)."""
    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "msg_type": "execute_request", "version": "5.3"}
    content = {"code": code, "silent": False, "store_history": False, "allow_stdin": False}
    ws.send(
        json.dumps(
            {
                "header": {**header, "session": "test", "username": "bob"},
                "parent_header": {},
                "metadata": {},
                "content": {**content, "user_expressions": {}, "stop_on_error": True},
                "channel": "shell",
                "buffers": [],
            }
        )
    )
    return msg_id


def _output(ws: ClientConnection, msg_id: str) -> str:
    """The stream output of one execution, up to the kernel going idle after it."""
    out = []
    while True:
        message = json.loads(ws.recv(timeout=60))
        if (message.get("parent_header") or {}).get("msg_id") != msg_id:
            continue
        if message["msg_type"] == "stream":
            out.append(message["content"]["text"])
        if message["msg_type"] == "error":
            out.append(message["content"]["evalue"])
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            return "".join(out)


def _start_kernel(stack: Stack, session: requests.Session) -> str:
    kernel = session.post(
        stack.notebook + "api/kernels",
        json={"name": "python3"},
        headers=_writes(stack, session),
        timeout=60,
    )
    assert kernel.status_code == 201, kernel.text[:300]
    return str(kernel.json()["id"])


def test_jupyter_rest_and_a_kernel_over_websocket_through_the_proxy(
    notebook_stack: Stack,
) -> None:
    stack = notebook_stack
    session = _opened(stack, "bob")
    assert session.get(stack.notebook + "api/kernels", timeout=30).json() == []

    # Jupyter's own XSRF check holds behind the proxy: a write without its token is refused.
    refused = session.post(
        stack.notebook + "api/kernels",
        json={"name": "python3"},
        headers={"Origin": stack.origin},
        timeout=30,
    )
    assert refused.status_code == 403
    assert session.get(stack.notebook + "api/kernels", timeout=30).json() == []

    kernel = _start_kernel(stack, session)
    with _kernel_socket(stack, session, kernel) as ws:
        assert _output(ws, _execute(ws, "print(6*7)")) == "42\n"
        # The kernel runs on the "head": in its process's folder under kubesim's root.
        where = _output(ws, _execute(ws, "import os; print(os.getcwd())")).strip()
        assert where.endswith("/notebook") and f"/procs/{stack.cluster.namespace}/" in where
    # JupyterLab's way: the v1 subprotocol chosen through the proxy, binary frames both ways.
    with _kernel_socket(stack, session, kernel, subprotocol=V1) as ws:
        assert ws.subprotocol == V1
        assert _output_v1(ws, "print(6*7)") == "42\n"

    # Jupyter's cookies other than _xsrf stay on the cluster's side of the proxy.
    names = {c.name for c in session.cookies}
    assert "_xsrf" in names
    assert not any(n.startswith("username-") for n in names)


def test_a_busy_kernel_keeps_the_cluster_alive_and_its_page_says_so(
    notebook_stack: Stack,
) -> None:
    stack = notebook_stack
    session = _opened(stack, "bob")
    kernel = _start_kernel(stack, session)

    def states() -> list[str]:
        kernels = session.get(stack.notebook + "api/kernels", timeout=30).json()
        return [k["execution_state"] for k in kernels]

    with _kernel_socket(stack, session, kernel) as ws:
        _execute(ws, "import time; time.sleep(600)")
        wait_for(lambda: states() == ["busy"], timeout=60, what="the kernel to be busy")
        idle.check_activity()
        cluster = ClusterRequest.objects.get(pk=stack.cluster.pk)
        assert cluster.activity_note == "a notebook kernel is busy"
        assert cluster.last_active_at == cluster.activity_checked_at  # in use now
        page = session.get(f"{stack.product}/t/acme/clusters/{NAME}/", timeout=30)
        assert "a notebook kernel is busy" in page.text

        interrupted = session.post(
            stack.notebook + f"api/kernels/{kernel}/interrupt",
            headers=_writes(stack, session),
            timeout=30,
        )
        assert interrupted.status_code == 204
        wait_for(lambda: states() == ["idle"], timeout=60, what="the kernel to be idle")

    idle.check_activity()
    cluster = ClusterRequest.objects.get(pk=stack.cluster.pk)
    assert cluster.activity_note.startswith("a notebook kernel was last busy at ")
    assert cluster.last_active_at is not None
    assert cluster.last_active_at < cluster.activity_checked_at  # idle since then


def _open_lab(stack: Stack, page: Any) -> Any:
    """bob follows "Open JupyterLab" from the cluster's page and opens a new notebook
    whose kernel is connected; its page."""
    from playwright.sync_api import expect

    # bob's session, made here (the test users' password hasher is the tests' own).
    session = signed_in(stack, "bob")
    page.context.add_cookies(
        [{"name": c.name, "value": c.value or "", "url": stack.product} for c in session.cookies]
    )
    page.goto(f"{stack.product}/t/acme/clusters/{NAME}/")
    link = page.get_by_role("link", name="Open JupyterLab")
    expect(link).to_have_attribute("href", f"{stack.product}/t/acme/clusters/{NAME}/notebook/")
    with page.expect_popup() as opened:
        link.click()
    lab = opened.value
    lab.wait_for_url(stack.notebook + "lab**", timeout=60_000)
    notebook_card = lab.locator('.jp-LauncherCard[data-category="Notebook"]').first
    expect(notebook_card).to_be_visible(timeout=90_000)
    notebook_card.click()
    # The kernel started over the WebSocket: JupyterLab shows it idle, then runs the cell.
    # The status bar says Idle only once the notebook's session holds a connected kernel;
    # the toolbar's indicator says so before, and a cell run without a kernel is silently
    # cleared instead of executed.
    expect(lab.get_by_role("button", name="Python 3 (ipykernel) | Idle", exact=True)).to_be_visible(
        timeout=90_000
    )
    return lab


def _run_cell(lab: Any, code: str) -> None:
    """Type ``code`` in the notebook's first cell and run it."""
    from playwright.sync_api import expect

    cell = lab.locator(".jp-Notebook .jp-Cell .cm-content").first
    cell.click()
    expect(cell).to_be_focused(timeout=30_000)  # the editor takes keys only once it has focus
    lab.keyboard.type(code)
    expect(cell).to_have_text(code)
    lab.keyboard.press("Shift+Enter")


@pytest.mark.browser
def test_open_jupyterlab_from_the_cluster_page_and_run_code_in_chromium(
    notebook_stack: Stack, page: Any
) -> None:
    from playwright.sync_api import expect

    lab = _open_lab(notebook_stack, page)
    _run_cell(lab, "print(6*7)")
    expect(lab.locator(".jp-OutputArea-output").first).to_have_text("42", timeout=60_000)


@pytest.mark.browser
def test_ray_init_in_a_notebook_joins_the_clusters_real_head_in_chromium(
    real_ray_notebook_stack: Stack, page: Any
) -> None:
    from playwright.sync_api import expect

    lab = _open_lab(real_ray_notebook_stack, page)
    _run_cell(lab, "import ray; ray.init(); print(ray.cluster_resources())")
    # The cluster's two one-GPU workers: ray.init() joined its head (a Ray of its own,
    # started by the kernel, would have no GPU).
    output = lab.locator(".jp-OutputArea-output", has_text="'GPU': 2.0")
    expect(output).to_be_visible(timeout=300_000)
    joined = lab.locator(".jp-OutputArea-output", has_text="Connecting to existing Ray cluster")
    expect(joined).to_be_visible()
    if os.environ.get("GANGWAY_SCREENSHOTS_DIR"):
        # JupyterLab asks once whether to fetch its news; answered, the prompt goes.
        prompt = lab.get_by_text("Would you like to get notified about official Jupyter news?")
        if prompt.count():
            lab.get_by_role("button", name="No").first.click()
            expect(prompt).to_be_hidden(timeout=30_000)
        lab.screenshot(path=str(SCREENSHOTS / "notebook.png"))
