"""The dashboard's new-cluster and new-job forms: the image select shows each allowed
image with its Ray version and the default chosen; the environment textarea reports
its faults line by line; what is accepted shows on the detail page."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from clusters.models import ClusterRequest

pytestmark = pytest.mark.django_db

NEW = "/t/acme/clusters/new/"
NEW_JOB = "/t/acme/jobs/new/"
OTHER = "rayproject/ray:2.40.0-py310-gpu"
FORM = {"kind": "dev", "flavor": "h100", "workers": 1}


@pytest.fixture(autouse=True)
def _two_images(settings: Any) -> None:
    settings.RAY_IMAGE_ALLOWLIST = [settings.RAY_IMAGE_DEFAULT, OTHER]


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("url", [NEW, NEW_JOB])
def test_the_image_select_shows_ray_versions_and_the_default(
    bob: Any, settings: Any, url: str
) -> None:
    page = client_for(bob).get(url).content.decode()
    default = settings.RAY_IMAGE_DEFAULT
    assert f'<option value="{default}" selected>{default} (Ray 2.49.2, default)</option>' in page
    assert f'<option value="{OTHER}">{OTHER} (Ray 2.40.0)</option>' in page


def test_a_chosen_image_and_env_are_stored_and_shown(bob: Any) -> None:
    client = client_for(bob)
    body = {**FORM, "name": "formed", "image": OTHER, "env": "WANDB_MODE=offline\nX=a=b\n\n"}
    response = client.post(NEW, body)
    assert response.status_code == 302, response.content
    row = ClusterRequest.objects.get(name="formed")
    assert row.image == OTHER and row.env == {"WANDB_MODE": "offline", "X": "a=b"}
    page = client.get(response["Location"]).content.decode()
    assert f"{OTHER} (Ray 2.40.0)" in page and "WANDB_MODE=offline" in page
    assert "name: WANDB_MODE" in page  # the manifests preview


def test_env_faults_are_reported_per_line(bob: Any) -> None:
    text = "GOOD=1\nCUDA_VISIBLE_DEVICES=0\nno equals sign\nGOOD=2\n1BAD=x\n"
    response = client_for(bob).post(NEW, {**FORM, "env": text})
    assert response.status_code == 400
    errors = response.context["form"].errors["env"]
    assert errors[0].startswith("Line 2: CUDA_VISIBLE_DEVICES") and "GPUs" in errors[0]
    assert errors[1] == "Line 3: write KEY=VALUE."
    assert errors[2] == "Line 4: GOOD is already set on line 1."
    assert errors[3].startswith("Line 5: '1BAD' is not a valid variable name")
    assert len(errors) == 4
    assert ClusterRequest.objects.count() == 0


def test_an_image_off_the_list_is_refused_in_the_form(bob: Any) -> None:
    response = client_for(bob).post(NEW, {**FORM, "image": "evil/miner:1"})
    assert response.status_code == 400
    (message,) = response.context["form"].errors["image"]
    assert "evil/miner:1" in message and "allow-list" in message
    assert ClusterRequest.objects.count() == 0


def test_the_container_box_appears_when_the_platform_enables_it(bob: Any, settings: Any) -> None:
    assert 'name="container_gpus"' not in client_for(bob).get(NEW).content.decode()
    settings.CONTAINER_GPUS_SECCOMP_PROFILE = "profiles/gangway-podman.json"
    assert 'name="container_gpus"' in client_for(bob).get(NEW).content.decode()
    response = client_for(bob).post(NEW, {**FORM, "name": "nested", "container_gpus": "on"})
    assert response.status_code == 302
    assert ClusterRequest.objects.get(name="nested").container_gpus


def test_a_new_job_takes_an_image(bob: Any) -> None:
    body = {"entrypoint": "python x.py", **FORM, "name": "jobbed", "image": OTHER}
    response = client_for(bob).post(NEW_JOB, body)
    assert response.status_code == 302, response.content
    assert ClusterRequest.objects.get(name="jobbed").image == OTHER
    page = client_for(bob).get(response["Location"]).content.decode()
    assert f"{OTHER} (Ray 2.40.0)" in page
