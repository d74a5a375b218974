"""The notebook convention on a head (``clusters/kube/notebook.py``) and how its kernels
count as activity (``clusters/engine/notebook_activity.py``)."""

from __future__ import annotations

import datetime
import shlex
from typing import Any

import pytest

from clusters.engine.notebook_activity import combine
from clusters.kinds.raycluster.manifests import raycluster
from clusters.kube.notebook import kernels_activity
from clusters.kube.raydash import Activity
from tests.frontend.conftest import request_cluster

__all__ = ["request_cluster"]

AT = datetime.datetime(2026, 11, 28, 10, 0, tzinfo=datetime.UTC)


def _head(manifest: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    group = manifest["spec"]["headGroupSpec"]
    return group["template"]["spec"]["containers"][0], group["rayStartParams"]


@pytest.mark.django_db
def test_a_notebook_head_gets_the_port_the_base_url_and_jupyter_after_ray_start(
    bob: Any, request_cluster: Any
) -> None:
    container, params = _head(raycluster(request_cluster(bob, name="nb", notebook=True)))
    assert {"name": "notebook", "containerPort": 8888, "protocol": "TCP"} in container["ports"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["GANGWAY_NOTEBOOK_BASE_URL"] == "/c/acme/nb/notebook/"
    assert env["GANGWAY_NOTEBOOK_PORT"] == "8888"
    (args,) = container["args"]
    argv = shlex.split(args)
    assert argv[:2] == ["jupyter", "lab"]
    assert "--ServerApp.base_url=/c/acme/nb/notebook/" in argv
    assert "--ServerApp.port=8888" in argv and "--IdentityProvider.token=" in argv
    # KubeRay runs `ray start` without --block, then the args, which keep the pod up.
    assert params["block"] == "false"

    container, params = _head(raycluster(request_cluster(bob, name="plain")))
    assert "args" not in container and "block" not in params
    assert all(p["name"] != "notebook" for p in container["ports"])


def test_kernels_busy_now_idle_since_or_none() -> None:
    later = (AT + datetime.timedelta(minutes=3)).isoformat().replace("+00:00", "Z")
    kernels = [
        {"execution_state": "idle", "last_activity": AT.isoformat()},
        {"execution_state": "busy", "last_activity": later},
    ]
    busy = kernels_activity(kernels)
    assert busy == Activity(True, AT + datetime.timedelta(minutes=3), "a notebook kernel is busy")
    kernels[1]["execution_state"] = "idle"
    assert kernels_activity(kernels) == Activity(
        False, AT + datetime.timedelta(minutes=3), "a notebook kernel was last busy at 10:03 UTC"
    )
    assert kernels_activity([]) == Activity(False, None, "no notebook kernel has run")
    assert kernels_activity({"message": "not a list"}).active is False


def test_the_source_that_kept_the_cluster_alive_is_named() -> None:
    ray_idle = Activity(False, AT, "no Ray driver or job is running")
    ray_busy = Activity(True, AT, "job raysubmit_1 is running")
    later = AT + datetime.timedelta(minutes=5)
    kernel_busy = Activity(True, later, "a notebook kernel is busy")
    kernel_idle = Activity(False, later, "a notebook kernel was last busy at 10:05 UTC")

    assert combine(ray_idle, kernel_busy) == kernel_busy
    assert combine(ray_busy, kernel_idle) == Activity(True, later, "job raysubmit_1 is running")
    assert combine(ray_idle, kernel_idle) == kernel_idle  # the kernel was used last
    earlier = Activity(False, AT - datetime.timedelta(hours=1), "a notebook kernel was …")
    assert combine(ray_idle, earlier) == ray_idle
    assert combine(ray_idle, Activity(False, None, "no notebook kernel has run")) == ray_idle
