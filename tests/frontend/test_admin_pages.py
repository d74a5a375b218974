"""The administration pages: platform admins run users, the catalogue, tenants and quotas
(with a preview of what a quota change does); tenant admins run members, their policy and
the queue. Every write goes through a service and is audited with the signed-in user; the
pages cost the same number of queries however many rows they show."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from knox.models import AuthToken

from clusters.domain.states import State
from clusters.models import ClusterEvent, ClusterRequest
from clusters.queue.admission_pass import run_admission_pass
from tenants.models import AuditEvent, GpuFlavor, Membership, Quota, Role, Tenant
from tests.factories import GpuFlavorFactory, MembershipFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def quota_form(**lines: int | str) -> dict[str, Any]:
    return {"cpu": 1000, "memory_gib": 8000, **lines}


PLATFORM_PAGES = [
    "/platform/users/",
    "/platform/flavors/",
    "/platform/flavors/h100/",
    "/platform/cohorts/",
    "/platform/tenants/",
    "/platform/tenants/acme/",
]


@pytest.mark.parametrize("url", PLATFORM_PAGES)
def test_platform_pages_are_for_platform_admins_only(
    url: str, root: Any, alice: Any, bob: Any
) -> None:
    assert client_for(root).get(url).status_code == 200
    for user in (alice, bob):  # a tenant admin and an engineer: the page does not exist
        assert client_for(user).get(url).status_code == 404
    anonymous = Client().get(url)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")


def test_a_tenant_admin_reaches_only_their_own_tenants_admin_pages(
    alice: Any, bob: Any, globex: Any
) -> None:
    admin = client_for(alice)
    for url in ("/t/acme/members/", "/t/acme/policy/"):
        assert admin.get(url).status_code == 200
        assert client_for(bob).get(url).status_code == 403  # a member, not an admin
    for url in ("/t/globex/members/", "/t/globex/policy/"):
        assert admin.get(url).status_code == 404  # another tenant does not exist for her


def test_creating_a_tenant_derives_its_namespace_and_is_audited(root: Any) -> None:
    response = client_for(root).post(
        "/platform/tenants/", {"slug": "speech", "name": "Speech", "cohort": "default", "weight": 2}
    )
    assert response.status_code == 302 and response["Location"] == "/platform/tenants/speech/"
    tenant = Tenant.objects.get(slug="speech")
    assert tenant.namespace == "gw-speech"
    event = AuditEvent.objects.get(action="tenant.create")
    assert (event.actor_name, event.tenant_slug) == ("root", "speech")
    page = client_for(root).get("/platform/tenants/speech/").content.decode()
    assert "gw-speech" in page


def test_a_bad_tenant_is_refused_with_the_reason_and_changes_nothing(root: Any, acme: Any) -> None:
    before = Tenant.objects.count()
    response = client_for(root).post(
        "/platform/tenants/", {"slug": "acme", "name": "Again", "cohort": "default", "weight": 1}
    )
    assert response.status_code == 400
    assert "acme" in response.content.decode()
    assert Tenant.objects.count() == before
    assert not AuditEvent.objects.filter(action="tenant.create").exists()


def test_the_quota_preview_warns_of_a_quota_larger_than_the_fleet(root: Any, acme: Any) -> None:
    """h100: 4 nodes x 8 GPUs = 32 in the fleet (the factory's)."""
    response = client_for(root).post(
        "/platform/tenants/acme/quota/preview/", quota_form(**{"h100-gpus": 400, "l4-gpus": 2})
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "Nominal h100 quotas would add up to 400 GPUs; the fleet has 32." in html
    assert Quota.objects.get(tenant=acme, flavor__name="h100").gpus == 16  # nothing saved


def test_the_quota_preview_names_the_requests_a_change_would_admit(
    root: Any, acme: Any, alice: Any, bob: Any, l4: Any, request_cluster: Any
) -> None:
    """acme's 2 L4s are held; a third waits. Raising the quota to 3 would admit it."""
    request_cluster(alice, flavor=l4, name="holder", workers=2)
    waiting = request_cluster(bob, flavor=l4, name="third", workers=1)
    run_admission_pass()
    assert ClusterRequest.objects.get(pk=waiting.pk).state == State.QUEUED
    html = (
        client_for(root)
        .post(
            "/platform/tenants/acme/quota/preview/", quota_form(**{"h100-gpus": 16, "l4-gpus": 3})
        )
        .content.decode()
    )
    assert "Would admit now:" in html and "acme/third" in html
    # Lowering it to 1 makes the holder a borrower: the preview says which clusters.
    html = (
        client_for(root)
        .post(
            "/platform/tenants/acme/quota/preview/", quota_form(**{"h100-gpus": 16, "l4-gpus": 1})
        )
        .content.decode()
    )
    assert "would hold 2 l4 GPUs against a nominal 1" in html and "holder" in html


def test_saving_a_quota_with_a_lending_limit_is_audited(root: Any, acme: Any) -> None:
    response = client_for(root).post(
        "/platform/tenants/acme/quota/",
        quota_form(**{"h100-gpus": 12, "h100-borrow": 4, "h100-lend": 6, "l4-gpus": 2}),
    )
    assert response.status_code == 302
    quota = Quota.objects.get(tenant=acme, flavor__name="h100")
    assert (quota.gpus, quota.borrow_limit, quota.lend_limit) == (12, 4, 6)
    event = AuditEvent.objects.get(action="quota.set")
    assert event.actor_name == "root"
    assert event.data["after"]["flavors"][0]["lend_limit"] == 6
    # Lending more than the nominal quota is refused and saves nothing.
    refused = client_for(root).post(
        "/platform/tenants/acme/quota/", quota_form(**{"h100-gpus": 4, "h100-lend": 5})
    )
    assert refused.status_code == 400
    assert "can lend at most its nominal quota" in refused.content.decode()
    assert Quota.objects.get(tenant=acme, flavor__name="h100").gpus == 12


def test_deactivating_a_user_ends_their_tokens_and_is_audited(root: Any, bob: Any) -> None:
    AuthToken.objects.create(user=bob)
    bobs_browser = client_for(bob)
    assert bobs_browser.get("/t/acme/").status_code == 200
    response = client_for(root).post(f"/platform/users/{bob.pk}/deactivate/")
    assert response.status_code == 302
    bob.refresh_from_db()
    assert not bob.is_active and not AuthToken.objects.filter(user=bob).exists()
    signed_out = bobs_browser.get("/t/acme/")  # his session ends at the next request
    assert signed_out.status_code == 302 and signed_out["Location"].startswith("/login/")
    event = AuditEvent.objects.get(action="user.deactivate")
    assert event.actor_name == "root" and event.data["tokens_revoked"] == 1
    # Nobody deactivates themselves (nor the last platform admin).
    client_for(root).post(f"/platform/users/{root.pk}/deactivate/")
    root.refresh_from_db()
    assert root.is_active


def test_a_flavor_in_use_stays_and_a_free_one_is_removed(root: Any, acme: Any) -> None:
    client = client_for(root)
    refused = client.post("/platform/flavors/h100/delete/")
    assert refused.status_code == 302 and refused["Location"] == "/platform/flavors/h100/"
    page = client.get(refused["Location"]).content.decode()
    assert "Flavor h100 is still used by 1 quota(s) and 0 cluster request(s)" in page
    GpuFlavorFactory(name="spare")
    removed = client.post("/platform/flavors/spare/delete/")
    assert removed.status_code == 302 and removed["Location"] == "/platform/flavors/"
    assert "Removed spare from the catalogue." in client.get("/platform/flavors/").content.decode()
    assert not GpuFlavor.objects.filter(name="spare").exists()
    assert GpuFlavor.objects.filter(name="h100").exists()


def test_a_refused_user_action_says_why(root: Any) -> None:
    client = client_for(root)
    page = client.post(f"/platform/users/{root.pk}/deactivate/", follow=True).content.decode()
    assert "You cannot deactivate yourself." in page
    assert "root deactivated." not in page


def test_a_user_is_created_and_made_platform_admin(root: Any) -> None:
    client = client_for(root)
    response = client.post(
        "/platform/users/",
        {"username": "sam", "email": "sam@example.com", "password": "a-long-enough-pass-1"},
    )
    assert response.status_code == 302
    sam = UserFactory._meta.model.objects.get(username="sam")
    assert not sam.is_staff
    client.post(f"/platform/users/{sam.pk}/make-admin/")
    sam.refresh_from_db()
    assert sam.is_staff
    assert list(
        AuditEvent.objects.filter(object_id=str(sam.pk)).values_list("action", flat=True)
    ) == ["user.platform_admin", "user.create"]


def test_flavors_are_added_and_edited_through_the_services(root: Any) -> None:
    client = client_for(root)
    response = client.post(
        "/platform/flavors/",
        {
            "name": "a10",
            "gpu_product": "NVIDIA-A10",
            "gpus_per_node": 4,
            "cpu_per_node": 64,
            "memory_per_node_gib": 256,
            "node_count": 2,
            "device_mode": "extended",
        },
    )
    assert response.status_code == 302
    edit = client.post(
        "/platform/flavors/a10/",
        {
            "name": "ignored",
            "gpu_product": "NVIDIA-A10",
            "gpus_per_node": 4,
            "cpu_per_node": 64,
            "memory_per_node_gib": 256,
            "node_count": 6,
            "device_mode": "extended",
        },
    )
    assert edit.status_code == 302
    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["flavor.create", "flavor.update"]
    from tenants.models import GpuFlavor

    assert GpuFlavor.objects.get(name="a10").node_count == 6  # the name stays a10


def test_under_kueue_the_flavor_form_refuses_a_second_mig_profile_on_one_class(
    root: Any, settings: Any
) -> None:
    from tenants.models import GpuFlavor

    settings.QUEUE_MODE = "kueue"
    client = client_for(root)
    mig = {
        "gpu_product": "NVIDIA-H100-80GB-HBM3",
        "gpus_per_node": 56,
        "cpu_per_node": 192,
        "memory_per_node_gib": 1800,
        "node_count": 1,
        "device_mode": "mig",
    }
    made = client.post("/platform/flavors/", {**mig, "name": "h100-1g", "mig_profile": "1g.10gb"})
    assert made.status_code == 302
    refused = client.post(
        "/platform/flavors/", {**mig, "name": "h100-3g", "mig_profile": "3g.40gb"}
    )
    assert refused.status_code == 400  # the form again, with the reason beside the field
    assert "kubernetes-sigs/kueue#10108" in refused.content.decode()
    assert not GpuFlavor.objects.filter(name="h100-3g").exists()


def test_members_roles_change_within_the_admins_own_rank(alice: Any, bob: Any, vera: Any) -> None:
    client = client_for(alice)
    response = client.post("/t/acme/members/vera/role/", {"role": "engineer"})
    assert response.status_code == 302
    assert Membership.objects.get(user=vera).role == Role.ENGINEER
    event = AuditEvent.objects.get(action="membership.role")
    assert event.actor_name == "alice"
    assert event.data == {"username": "vera", "before": "viewer", "after": "engineer"}
    # The last admin cannot be demoted: the page says why and nothing changes.
    page = client.post("/t/acme/members/alice/role/", {"role": "viewer"}, follow=True)
    assert "last admin of acme" in page.content.decode()
    assert Membership.objects.get(user=alice).role == Role.ADMIN


def test_adding_a_member_needs_an_account_and_is_audited(alice: Any) -> None:
    UserFactory(username="erin")
    client = client_for(alice)
    missing = client.post("/t/acme/members/", {"username": "nobody", "role": "engineer"})
    assert missing.status_code == 400 and "No user named" in missing.content.decode()
    added = client.post("/t/acme/members/", {"username": "erin", "role": "engineer"})
    assert added.status_code == 302
    assert AuditEvent.objects.get(action="membership.add").actor_name == "alice"


def test_a_tenant_admin_sets_policy_within_what_the_platform_allows(alice: Any, acme: Any) -> None:
    client = client_for(alice)
    form = {
        "max_dev_clusters_per_user": 2,
        "max_dev_gpus_per_user": 4,
        "dev_ttl_hours": acme.max_ttl_hours + 1,
        "idle_suspend_minutes": 30,
        "idle_gpu_util_percent": 0,
    }
    refused = client.post("/t/acme/policy/", form)
    assert refused.status_code == 400
    assert f"At most {acme.max_ttl_hours} hours" in refused.content.decode()
    assert not AuditEvent.objects.filter(action="tenant.policy").exists()
    saved = client.post("/t/acme/policy/", {**form, "dev_ttl_hours": 4})
    assert saved.status_code == 302
    acme.refresh_from_db()
    assert (acme.max_dev_clusters_per_user, acme.dev_ttl_hours) == (2, 4)
    assert AuditEvent.objects.get(action="tenant.policy").actor_name == "alice"


def test_a_tenant_admin_lets_jobs_install_from_direct_urls(alice: Any, acme: Any) -> None:
    page = client_for(alice).get("/t/acme/policy/").content.decode()
    assert 'name="allow_pip_direct_urls"' in page and "--index-url are refused" in page
    form = {
        "max_dev_clusters_per_user": acme.max_dev_clusters_per_user,
        "max_dev_gpus_per_user": acme.max_dev_gpus_per_user,
        "dev_ttl_hours": acme.dev_ttl_hours,
        "idle_suspend_minutes": acme.idle_suspend_minutes,
        "idle_gpu_util_percent": acme.idle_gpu_util_percent,
        "allow_pip_direct_urls": "on",
    }
    assert client_for(alice).post("/t/acme/policy/", form).status_code == 302
    acme.refresh_from_db()
    assert acme.allow_pip_direct_urls is True
    event = AuditEvent.objects.get(action="tenant.policy")
    assert event.data["after"]["allow_pip_direct_urls"] is True


def test_a_tenant_is_archived_only_when_it_holds_nothing(
    root: Any, acme: Any, globex: Any, alice: Any, request_cluster: Any, as_user: Any
) -> None:
    request_cluster(alice, name="still-here")
    client = client_for(root)
    page = client.post("/platform/tenants/acme/archive/", follow=True).content.decode()
    assert "still has requests that hold or wait for GPUs (1 queued)" in page
    assert Tenant.objects.get(pk=acme.pk).archived_at is None
    client.post("/platform/tenants/globex/archive/")
    assert Tenant.objects.get(pk=globex.pk).archived_at is not None
    charlie = UserFactory(username="carl")
    MembershipFactory(tenant=globex, user=charlie, role=Role.ADMIN)
    refused = as_user(charlie).post(
        "/api/v1/tenants/globex/clusters/", {"kind": "dev", "flavor": "l4", "workers": 1}
    )
    assert refused.status_code == 409 and "archived" in refused.json()["error"]["message"]
    assert list(
        AuditEvent.objects.filter(action="tenant.archive").values_list("tenant_slug", flat=True)
    ) == ["globex"]


def test_the_manage_page_holds_and_prioritises_with_the_owners_timeline(
    alice: Any, bob: Any, l4: Any, request_cluster: Any
) -> None:
    request_cluster(alice, flavor=l4, name="holder", workers=2)
    run_admission_pass()
    waiting = request_cluster(bob, flavor=l4, name="bobs")
    client = client_for(alice)
    assert client.get("/t/acme/clusters/bobs/manage/").status_code == 200
    missing = client.post("/t/acme/clusters/bobs/manage/priority/", {"priority": 5})
    assert missing.status_code == 400 and "Say why" in missing.content.decode()
    done = client.post(
        "/t/acme/clusters/bobs/manage/priority/", {"priority": 5, "reason": "launch"}
    )
    assert done.status_code == 302 and done["Location"] == "/t/acme/queue/"
    client.post("/t/acme/clusters/bobs/manage/hold/", {"reason": "budget review"})
    waiting.refresh_from_db()
    assert (waiting.priority, waiting.hold_reason) == (5, "budget review")
    messages = set(ClusterEvent.objects.filter(cluster=waiting).values_list("message", flat=True))
    assert {"priority 0 -> 5: launch", "on hold: budget review"} <= messages
    # bob reads it on his cluster's page.
    assert "budget review" in client_for(bob).get("/t/acme/clusters/bobs/").content.decode()
    # An engineer has no such page.
    assert client_for(bob).get("/t/acme/clusters/bobs/manage/").status_code == 403


def _more_tenants(start: int, n: int) -> None:
    for i in range(start, start + n):
        tenant = TenantFactory(slug=f"team-{i}", name=f"Team {i}")
        MembershipFactory(tenant=tenant, user=UserFactory(username=f"user-{i}"), role=Role.ADMIN)


def _more_members(start: int, n: int, acme: Any) -> None:
    for i in range(start, start + n):
        MembershipFactory(tenant=acme, user=UserFactory(username=f"member-{i}"), role=Role.VIEWER)


@pytest.mark.parametrize(
    ("url", "who"),
    [
        ("/platform/users/", "root"),
        ("/platform/tenants/", "root"),
        ("/platform/flavors/", "root"),
        ("/platform/cohorts/", "root"),
        ("/t/acme/members/", "alice"),
    ],
)
def test_admin_pages_cost_the_same_queries_for_more_rows(
    url: str, who: str, root: Any, alice: Any, acme: Any
) -> None:
    client = client_for(root if who == "root" else alice)
    counts = []
    for start, n in ((0, 2), (2, 6)):
        _more_tenants(start, n)
        _more_members(start, n, acme)
        client.get(url)
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
