"""A request's image, environment and container_gpus through the API: accepted and
stored, shown on the detail and in the manifests; refused with a 400 that names the
allow-list or the variable, writing nothing. And the image allow-list endpoint."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.models import ClusterEvent, ClusterRequest, Job
from controlplane.checks import allowlist_faults, image_allowlist
from tenants.models import AuditEvent, GpuFlavor

pytestmark = pytest.mark.django_db

CLUSTERS = "/api/v1/tenants/acme/clusters/"
DRY_RUN = CLUSTERS + "dry-run/"
JOBS = "/api/v1/tenants/acme/jobs/"
OTHER = "rayproject/ray:2.40.0-py310-gpu"
PROFILE = "profiles/gangway-podman.json"


@pytest.fixture(autouse=True)
def _two_images(settings: Any) -> None:
    settings.RAY_IMAGE_ALLOWLIST = [settings.RAY_IMAGE_DEFAULT, OTHER]


def _rows() -> tuple[int, int, int, int]:
    return (
        ClusterRequest.objects.count(),
        Job.objects.count(),
        ClusterEvent.objects.count(),
        AuditEvent.objects.count(),
    )


def test_the_images_endpoint_lists_the_allow_list(
    as_user: Any, charlie: Any, settings: Any
) -> None:
    body = as_user(charlie).get("/api/v1/images/").json()
    assert body["results"] == [
        {"image": settings.RAY_IMAGE_DEFAULT, "ray_version": "2.49.2", "default": True},
        {"image": OTHER, "ray_version": "2.40.0", "default": False},
    ]
    assert as_user(None).get("/api/v1/images/").status_code in (401, 403)


def test_image_and_env_are_stored_shown_and_rendered(as_user: Any, bob: Any) -> None:
    env = {"WANDB_MODE": "offline", "HF_HOME": "/data/hf"}
    body = {"flavor": "h100", "name": "mine", "image": OTHER, "env": env}
    response = as_user(bob).post(CLUSTERS, body, format="json")
    assert response.status_code == 201, response.json()
    out = response.json()
    assert (out["image"], out["ray_version"]) == (OTHER, "2.40.0")
    assert out["env"] == {"HF_HOME": "/data/hf", "WANDB_MODE": "offline"}
    assert out["container_gpus"] is False
    row = ClusterRequest.objects.get(name="mine")
    assert row.image == OTHER and row.env == env
    detail = as_user(bob).get(CLUSTERS + "mine/").json()
    assert detail["image"] == OTHER and detail["env"] == out["env"]
    (rc,) = as_user(bob).get(CLUSTERS + "mine/manifests/").json()["manifests"]
    head = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert head["image"] == OTHER
    assert {"name": "WANDB_MODE", "value": "offline"} in head["env"]
    yaml_text = as_user(bob).get(CLUSTERS + "mine/manifests/?format=yaml").content.decode()
    assert "name: WANDB_MODE" in yaml_text and "value: offline" in yaml_text


def test_no_image_means_the_default_stored(as_user: Any, bob: Any, settings: Any) -> None:
    out = as_user(bob).post(CLUSTERS, {"flavor": "h100"}, format="json").json()
    assert out["image"] == settings.RAY_IMAGE_DEFAULT and out["env"] == {}
    assert ClusterRequest.objects.get().image == settings.RAY_IMAGE_DEFAULT


@pytest.mark.parametrize("url", [CLUSTERS, DRY_RUN])
def test_a_bad_image_is_refused_naming_the_allow_list(as_user: Any, bob: Any, url: str) -> None:
    before = _rows()
    response = as_user(bob).post(url, {"flavor": "h100", "image": "evil/miner:1"}, format="json")
    assert response.status_code == 400
    (message,) = response.json()["error"]["fields"]["image"]
    assert "evil/miner:1" in message and "RAY_IMAGE_ALLOWLIST" in message and OTHER in message
    assert _rows() == before


@pytest.mark.parametrize("url", [CLUSTERS, DRY_RUN])
def test_a_forbidden_variable_is_refused_by_name(as_user: Any, bob: Any, url: str) -> None:
    before = _rows()
    env = {"CUDA_VISIBLE_DEVICES": "0,1", "LD_PRELOAD": "/x.so", "FINE": "1"}
    response = as_user(bob).post(url, {"flavor": "h100", "env": env}, format="json")
    assert response.status_code == 400
    faults = response.json()["error"]["fields"]["env"]
    assert len(faults) == 2
    assert faults[0].startswith("CUDA_VISIBLE_DEVICES") and "GPUs" in faults[0]
    assert faults[1].startswith("LD_PRELOAD")
    assert _rows() == before


def test_env_faults_come_with_the_shapes(as_user: Any, bob: Any) -> None:
    body = {"flavor": "h100", "workers": 99, "env": {"NVIDIA_VISIBLE_DEVICES": "all"}}
    fields = as_user(bob).post(CLUSTERS, body, format="json").json()["error"]["fields"]
    assert {"workers", "env"} <= set(fields)


def test_a_dry_run_shows_the_env_in_its_manifests(as_user: Any, bob: Any) -> None:
    body = {"flavor": "h100", "env": {"WANDB_MODE": "offline"}, "image": OTHER}
    out = as_user(bob).post(DRY_RUN, body, format="json").json()
    (rc,) = out["manifests"]
    worker = rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    # An unsaved request has no notice endpoint yet: only the annotation file's path.
    assert worker["image"] == OTHER and worker["env"] == [
        {"name": "WANDB_MODE", "value": "offline"},
        {"name": "GANGWAY_PODINFO_ANNOTATIONS", "value": "/etc/gangway/podinfo/annotations"},
    ]
    assert ClusterRequest.objects.count() == 0


def test_container_gpus_is_off_without_the_platforms_profile(as_user: Any, bob: Any) -> None:
    response = as_user(bob).post(
        CLUSTERS, {"flavor": "h100", "container_gpus": True}, format="json"
    )
    assert response.status_code == 400
    (message,) = response.json()["error"]["fields"]["container_gpus"]
    assert "CONTAINER_GPUS_SECCOMP_PROFILE" in message
    assert ClusterRequest.objects.count() == 0


def test_container_gpus_on_a_baseline_tenant(as_user: Any, bob: Any, settings: Any) -> None:
    settings.CONTAINER_GPUS_SECCOMP_PROFILE = PROFILE
    body = {"flavor": "h100", "name": "nested", "container_gpus": True}
    out = as_user(bob).post(CLUSTERS, body, format="json").json()
    assert out["container_gpus"] is True
    (rc,) = as_user(bob).get(CLUSTERS + "nested/manifests/").json()["manifests"]
    init = rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["initContainers"][0]
    assert init["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_container_gpus_is_refused_where_pod_security_is_restricted(
    as_user: Any, bob: Any, acme: Any, settings: Any
) -> None:
    settings.CONTAINER_GPUS_SECCOMP_PROFILE = PROFILE
    acme.pod_security = "restricted"
    acme.save()
    before = _rows()
    response = as_user(bob).post(
        CLUSTERS, {"flavor": "h100", "container_gpus": True}, format="json"
    )
    assert response.status_code == 400
    (message,) = response.json()["error"]["fields"]["container_gpus"]
    assert "restricted" in message and "SETUID" in message
    assert _rows() == before


def test_container_gpus_needs_whole_gpus(as_user: Any, bob: Any, settings: Any) -> None:
    settings.CONTAINER_GPUS_SECCOMP_PROFILE = PROFILE
    settings.KAI_ENABLED = True
    body = {"flavor": "l4", "gpu_fraction": "0.5", "container_gpus": True}
    fields = as_user(bob).post(CLUSTERS, body, format="json").json()["error"]["fields"]
    assert "whole GPUs" in fields["container_gpus"][0]


def test_a_job_of_its_own_takes_an_image_and_env(as_user: Any, bob: Any) -> None:
    body = {
        "entrypoint": "python x.py",
        "flavor": "h100",
        "name": "j1",
        "image": OTHER,
        "env": {"WANDB_MODE": "offline"},
    }
    response = as_user(bob).post(JOBS, body, format="json")
    assert response.status_code == 201, response.json()
    out = response.json()
    assert out["image"] == OTHER and out["env"] == {"WANDB_MODE": "offline"}
    row = ClusterRequest.objects.get(name="j1")
    assert row.image == OTHER


def test_a_job_with_a_bad_image_writes_nothing(as_user: Any, bob: Any) -> None:
    before = _rows()
    body = {"entrypoint": "python x.py", "flavor": "h100", "image": "evil/miner:1"}
    response = as_user(bob).post(JOBS, body, format="json")
    assert response.status_code == 400 and "image" in response.json()["error"]["fields"]
    assert _rows() == before


def test_a_job_on_a_host_uses_the_hosts_image(as_user: Any, bob: Any, settings: Any) -> None:
    from django.utils import timezone

    ClusterRequest.objects.create(
        tenant=bob.memberships.get().tenant,
        owner=bob,
        name="box",
        kind="dev",
        flavor=GpuFlavor.objects.get(name="h100"),
        workers=1,
        gpus=1,
        state="ready",
        holds_gpus=True,
        admitted_at=timezone.now(),
        image=settings.RAY_IMAGE_DEFAULT,
    )
    before = _rows()
    body = {"entrypoint": "python x.py", "cluster": "box", "image": OTHER, "env": {"A": "1"}}
    response = as_user(bob).post(JOBS, body, format="json")
    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert "box" in fields["image"][0] and settings.RAY_IMAGE_DEFAULT in fields["image"][0]
    assert "runtime_env.env_vars" in fields["env"][0]
    assert _rows() == before
    same = {"entrypoint": "python x.py", "cluster": "box", "image": settings.RAY_IMAGE_DEFAULT}
    out = as_user(bob).post(JOBS, same, format="json").json()
    assert out["image"] == settings.RAY_IMAGE_DEFAULT


def test_the_allow_list_check(settings: Any) -> None:
    assert image_allowlist() == []
    settings.RAY_IMAGE_ALLOWLIST = ["Not An Image", OTHER, OTHER]
    ids = {m.id for m in image_allowlist()}
    assert ids == {"gangway.E004"}
    faults = allowlist_faults(["Not An Image", OTHER, OTHER], settings.RAY_IMAGE_DEFAULT)
    assert len(faults) == 3
    assert allowlist_faults([], "x") == ["It is empty: no request could name an image."]
    assert allowlist_faults(["ghcr.io:443/team/ray@sha256:" + "a" * 64], "x")[0].startswith(
        "The default image"
    )
