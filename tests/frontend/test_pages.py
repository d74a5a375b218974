"""The dashboard through Django's test client: scoping, the create form and its verdict
panel, the buttons (each a service call), refusals, and constant query counts."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.html import escape

from clusters.domain.states import State
from clusters.kinds.rayjob.requests import job_create
from clusters.kinds.rayjob.spec import JobSpec
from clusters.models import ClusterRequest
from clusters.rows.spec import ClusterSpec
from tenants.models import AuditEvent
from tests.frontend.conftest import make_ready


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def tenant_pages(name: str = "bob-ready") -> list[str]:
    return [
        "/t/acme/",
        "/t/acme/clusters/new/",
        f"/t/acme/clusters/{name}/",
        "/t/acme/queue/",
        "/t/acme/usage/",
        "/t/acme/usage/?days=7",
    ]


def test_every_page_renders_for_a_member(bob: Any, ready_cluster: Any) -> None:
    client = client_for(bob)
    for url in ["/", *tenant_pages()]:
        response = client.get(url)
        assert response.status_code == 200, url
    home = client.get("/").content.decode()
    assert "Acme Research" in home and "bob-ready" in home
    assert "1 / 16 GPUs" in home  # the held-vs-quota bar of h100


def test_home_shows_cpu_and_memory_held_against_their_quotas(bob: Any, ready_cluster: Any) -> None:
    # bob's one-H100 dev cluster: a 24-CPU, 225-GiB slice of the node plus a 2-CPU, 8-GiB
    # head, against acme's 1000 CPU and 8000 GiB.
    home = client_for(bob).get("/").content.decode()
    assert "26 / 1000 CPU" in home
    assert "233 / 8000 GiB" in home


def test_home_counts_each_kinds_requests_and_links_to_that_kinds_list(
    bob: Any, ready_cluster: Any, acme: Any, h100: Any
) -> None:
    job = JobSpec(entrypoint="python train.py", name="bob-train")
    spec = ClusterSpec(kind="dev", flavor=h100, workers=1)
    job_create(actor=bob, tenant=acme, spec=spec, job=job)
    home = client_for(bob).get("/").content.decode()
    # A job's queued state links to the jobs list, the cluster's ready state to the clusters'.
    assert 'href="/t/acme/jobs/?state=queued"' in home
    assert 'href="/t/acme/?state=ready"' in home
    assert 'href="/t/acme/?state=queued"' not in home
    assert "bob-ready" in home and "bob-train" in home


def test_a_platform_admins_tenant_page_links_to_every_kinds_list(root: Any, acme: Any) -> None:
    page = client_for(root).get("/platform/tenants/acme/").content.decode()
    for path in ("/t/acme/", "/t/acme/jobs/", "/t/acme/services/"):
        assert f'href="{path}"' in page, path


def test_another_tenants_pages_are_404(charlie: Any, ready_cluster: Any) -> None:
    client = client_for(charlie)
    for url in tenant_pages():
        assert client.get(url).status_code == 404, url
    assert client.post("/t/acme/clusters/new/verdict/", {"flavor": "h100"}).status_code == 404
    for action in ("suspend", "resume", "delete", "extend"):
        response = client.post(f"/t/acme/clusters/bob-ready/{action}/", {"hours": 4})
        assert response.status_code == 404
    assert "bob-ready" not in client.get("/").content.decode()
    ready_cluster.refresh_from_db()
    assert ready_cluster.state == State.READY


def test_anonymous_users_are_sent_to_login(ready_cluster: Any) -> None:
    client = Client()
    for url in ["/", *tenant_pages()]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/login/?next=")


def test_list_shows_queue_position_reason_and_eta_and_ready_details(
    bob: Any, alice: Any, request_cluster: Any, ready_cluster: Any
) -> None:
    # acme may hold 16 H100s (no cohort to borrow from) and bob holds 1: alice's two
    # whole-node prod workers (16 GPUs) wait until bob's cluster expires.
    request_cluster(alice, name="big-train", kind="prod", workers=2)
    from clusters.queue.admission_pass import run_admission_pass

    run_admission_pass()
    page = client_for(bob).get("/t/acme/").content.decode()
    assert "big-train" in page
    assert "#1 in acme&#x27;s queue" in page
    waiting = ClusterRequest.objects.get(name="big-train")
    assert waiting.queue_reason and escape(waiting.queue_message.rstrip(".")) in page
    assert "starts in about 8 h" in page  # bob's cluster expires then
    assert "ray://bob-ready-head-svc.gw-acme.svc:10001" in page
    assert "expires <time" in page and 'title="' in page
    assert 'hx-trigger="every 3s"' in page
    # The htmx poll gets only the table.
    partial = client_for(bob).get("/t/acme/", HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<div id="cluster-rows"') and "<html" not in partial


def test_list_filters_with_the_shared_filterset(
    bob: Any, alice: Any, request_cluster: Any, ready_cluster: Any
) -> None:
    request_cluster(alice, name="alice-dev")
    client = client_for(bob)
    page = client.get("/t/acme/?owner=alice").content.decode()
    assert "alice-dev" in page and "bob-ready" not in page
    page = client.get("/t/acme/?state=ready").content.decode()
    assert "bob-ready" in page and "alice-dev" not in page


def test_list_query_count_does_not_grow_with_clusters(
    bob: Any, alice: Any, acme: Any, request_cluster: Any, ready_cluster: Any
) -> None:
    acme.max_dev_clusters_per_user = 10
    acme.max_dev_gpus_per_user = 10
    acme.save()
    client = client_for(bob)

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/t/acme/").status_code == 200
        return len(ctx.captured_queries)

    few = count()
    for n in range(4):
        request_cluster(alice, name=f"alice-{n}")
    make_ready(request_cluster(alice, name="alice-ready"))
    assert count() == few


def test_create_form_creates_through_the_service(bob: Any) -> None:
    client = client_for(bob)
    response = client.post(
        "/t/acme/clusters/new/", {"name": "bob-form", "kind": "dev", "flavor": "h100", "workers": 2}
    )
    assert response.status_code == 302
    assert response["Location"] == "/t/acme/clusters/bob-form/"
    cluster = ClusterRequest.objects.get(name="bob-form")
    assert (cluster.owner, cluster.state, cluster.workers, cluster.gpus) == (bob, "queued", 2, 2)
    assert AuditEvent.objects.filter(action="cluster.create", object_repr__contains="bob-form")
    page = client.get(response["Location"]).content.decode()
    assert "bob-form is queued." in page and "badge-queued" in page


def test_create_form_shows_service_errors_next_to_fields(bob: Any) -> None:
    response = client_for(bob).post(
        "/t/acme/clusters/new/", {"name": "dry-run", "kind": "dev", "flavor": "h100", "workers": 1}
    )
    assert response.status_code == 400
    assert response.context["form"].errors["name"]
    assert ClusterRequest.objects.count() == 0


def test_user_cap_is_a_banner_and_nothing_is_written(
    bob: Any, acme: Any, request_cluster: Any
) -> None:
    for n in range(acme.max_dev_clusters_per_user):
        request_cluster(bob, name=f"bob-{n}")
    before = ClusterRequest.objects.count()
    response = client_for(bob).post(
        "/t/acme/clusters/new/", {"kind": "dev", "flavor": "h100", "workers": 1}
    )
    assert response.status_code == 409
    body = response.content.decode()
    assert 'class="banner banner-error"' in body and "the limit is" in body
    assert ClusterRequest.objects.count() == before


def test_prod_is_offered_to_admins_only(bob: Any, alice: Any) -> None:
    bob_form = client_for(bob).get("/t/acme/clusters/new/").content.decode()
    assert 'value="prod"' not in bob_form and "min_workers" not in bob_form
    alice_form = client_for(alice).get("/t/acme/clusters/new/").content.decode()
    assert 'value="prod"' in alice_form and "min_workers" in alice_form
    # Even a hand-written POST cannot get bob a production cluster.
    response = client_for(bob).post(
        "/t/acme/clusters/new/", {"kind": "prod", "flavor": "h100", "workers": 1}
    )
    assert response.status_code == 400
    assert ClusterRequest.objects.count() == 0


def test_fractional_gpus_only_with_kai_and_with_the_isolation_note(bob: Any, settings: Any) -> None:
    assert "gpu_fraction" not in client_for(bob).get("/t/acme/clusters/new/").content.decode()
    settings.KAI_ENABLED = True
    page = client_for(bob).get("/t/acme/clusters/new/").content.decode()
    assert "gpu_fraction" in page and "not memory-isolated" in page and "on l4 only" in page


VERDICT = "/t/acme/clusters/new/verdict/"


def test_verdict_panel_fits_now(bob: Any) -> None:
    body = client_for(bob).post(VERDICT, {"kind": "dev", "flavor": "h100", "workers": 1})
    assert body.status_code == 200
    assert 'data-verdict="fits_now"' in body.content.decode()
    assert ClusterRequest.objects.count() == 0


def test_verdict_panel_will_queue_with_position_eta_and_alternatives(
    bob: Any, alice: Any, request_cluster: Any
) -> None:
    # alice holds all 16 H100s acme may hold, for two more hours.
    for name in ("fill-a", "fill-b"):
        make_ready(request_cluster(alice, name=name, kind="prod", workers=1, ttl_hours=2))
    text = client_for(bob).post(VERDICT, {"kind": "dev", "flavor": "h100", "workers": 1})
    html = text.content.decode()
    assert 'data-verdict="will_queue"' in html
    assert (
        "Will queue on h100 (1 GPU charged): #1 in acme&#x27;s queue, "
        "expected to start in about 2 h.</strong> It waits because acme"
    ) in html
    assert "<strong>l4</strong>: fits now (1 GPU charged)" in html
    assert "Starts on l4 now (1 GPU charged), or on h100 in about 2 h (1 GPU charged)." in html


def test_verdict_panel_says_when_a_large_queue_was_read(
    bob: Any, alice: Any, request_cluster: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clusters.queue import dry_run_cache as recorded

    for name in ("fill-a", "fill-b"):
        make_ready(request_cluster(alice, name=name, kind="prod", workers=1, ttl_hours=2))
    form = {"kind": "dev", "flavor": "h100", "workers": 1}
    client = client_for(bob)
    html = client.post(VERDICT, form).content.decode()
    assert 'data-verdict="will_queue"' in html and "data-as-of" not in html  # read now
    # As if reading the queue were slow (a long queue): the next verdict after a change
    # answers from that reading (its next one, in the background, is not started here).
    settings.DRY_RUN_STALE_SECONDS = 60
    monkeypatch.setattr(recorded, "SLOW_BUILD", 0.0)
    monkeypatch.setattr(recorded, "_refresh_in_background", lambda: None)
    client.post(VERDICT, form)  # read again, now counted as slow
    request_cluster(alice, name="later", workers=1)  # the queue changes
    read_at = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: read_at + timedelta(seconds=5))
    html = client.post(VERDICT, form).content.decode()
    assert 'data-verdict="will_queue"' in html
    assert "data-as-of" in html and "As the queue stood" in html and "ago" in html


def test_verdict_panel_never_fits_and_invalid(bob: Any, l4: Any) -> None:
    client = client_for(bob)
    html = client.post(VERDICT, {"kind": "dev", "flavor": "l4", "workers": 3}).content.decode()
    assert 'data-verdict="never_fits"' in html
    html = client.post(VERDICT, {"kind": "dev", "flavor": "h100", "workers": 99}).content.decode()
    assert 'data-verdict="invalid"' in html and "workers" in html


def test_verdict_panel_agrees_with_the_api(bob: Any, as_user: Any) -> None:
    body = {"kind": "dev", "flavor": "h100", "workers": 2}
    api = as_user(bob).post("/api/v1/tenants/acme/clusters/dry-run/", body, format="json")
    html = client_for(bob).post(VERDICT, body).content.decode()
    assert f'data-verdict="{api.json()["verdict"]}"' in html


def test_viewer_sees_no_buttons_and_no_form(vera: Any, ready_cluster: Any) -> None:
    client = client_for(vera)
    page = client.get("/t/acme/clusters/bob-ready/").content.decode()
    assert "Suspend" not in page and "Delete" not in page and "+4 h" not in page
    assert client.get("/t/acme/clusters/new/").status_code == 403
    assert "New cluster" not in client.get("/t/acme/").content.decode()


@pytest.mark.parametrize("action", ["suspend", "delete", "extend"])
def test_viewer_post_is_refused_and_nothing_changes(
    vera: Any, ready_cluster: Any, action: str
) -> None:
    before = (ready_cluster.state, ready_cluster.expires_at, AuditEvent.objects.count())
    response = client_for(vera).post(f"/t/acme/clusters/bob-ready/{action}/", {"hours": 4})
    assert response.status_code == 403
    ready_cluster.refresh_from_db()
    assert (ready_cluster.state, ready_cluster.expires_at, AuditEvent.objects.count()) == before


def test_another_engineer_cannot_touch_bobs_cluster(
    bob: Any, ready_cluster: Any, acme: Any
) -> None:
    from tenants.models import Role
    from tests.factories import MembershipFactory, UserFactory

    dana = UserFactory(username="dana")
    MembershipFactory(tenant=acme, user=dana, role=Role.ENGINEER)
    client = client_for(dana)
    assert "Suspend" not in client.get("/t/acme/clusters/bob-ready/").content.decode()
    assert client.post("/t/acme/clusters/bob-ready/suspend/").status_code == 403


def test_owner_buttons_call_the_services(bob: Any, ready_cluster: Any) -> None:
    client = client_for(bob)
    url = "/t/acme/clusters/bob-ready/"
    page = client.get(url).content.decode()
    for label in ("+4 h", "+24 h", "Suspend", "Delete", "Copy snippet", "ray.init("):
        assert label in page
    expires = ready_cluster.expires_at

    assert client.post(url + "extend/", {"hours": 4}).status_code == 302
    ready_cluster.refresh_from_db()
    assert (ready_cluster.expires_at - expires).total_seconds() == 4 * 3600

    assert client.post(url + "suspend/").status_code == 302
    ready_cluster.refresh_from_db()
    assert ready_cluster.state == State.SUSPENDED and not ready_cluster.holds_gpus
    assert "Resume" in client.get(url).content.decode()

    assert client.post(url + "resume/").status_code == 302
    ready_cluster.refresh_from_db()
    assert ready_cluster.state == State.QUEUED

    assert client.post(url + "delete/").status_code == 302
    ready_cluster.refresh_from_db()
    assert ready_cluster.state == State.DELETING
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"cluster.extend", "cluster.suspend", "cluster.resume", "cluster.delete"} <= actions
    history = client.get(url).content.decode()
    assert "ready → suspended" in history and "suspended → queued" in history


def test_refusal_by_state_is_a_message(bob: Any, ready_cluster: Any) -> None:
    client = client_for(bob)
    response = client.post("/t/acme/clusters/bob-ready/resume/", follow=True)
    assert "Only a suspended cluster can be resumed" in response.content.decode()
    response = client.post("/t/acme/clusters/bob-ready/extend/", {"hours": 1000}, follow=True)
    assert response.status_code == 400
    assert "maximum lifetime" in response.content.decode()


def test_admin_manages_any_cluster(alice: Any, ready_cluster: Any) -> None:
    client = client_for(alice)
    assert "Suspend" in client.get("/t/acme/clusters/bob-ready/").content.decode()
    client.post("/t/acme/clusters/bob-ready/suspend/")
    ready_cluster.refresh_from_db()
    assert ready_cluster.state == State.SUSPENDED


def test_queue_and_usage_pages(bob: Any, alice: Any, request_cluster: Any) -> None:
    for name in ("fill-a", "fill-b"):
        make_ready(request_cluster(alice, name=name, kind="prod", workers=1, ttl_hours=2))
    waiting = request_cluster(bob, name="bob-waits")
    from clusters.queue.admission_pass import run_admission_pass

    run_admission_pass()
    waiting.refresh_from_db()
    assert waiting.queue_position == 1
    page = client_for(bob).get("/t/acme/queue/").content.decode()
    assert "bob-waits" in page and escape(waiting.queue_message) in page
    assert "about 2 h" in page
    usage = client_for(bob).get("/t/acme/usage/?days=7").content.decode()
    assert "alice" in usage and "GPU-hours" in usage


def test_platform_admins_see_every_tenants_queue(
    client: Any, root: Any, bob: Any, acme: Any, h100: Any
) -> None:
    from clusters.models import ClusterRequest

    ClusterRequest.objects.create(
        tenant=acme,
        owner=bob,
        name="waits",
        kind="dev",
        flavor=h100,
        workers=1,
        gpus=1,
        queue_flavor_position=1,
        queue_reason="tenant_quota",
        queue_message="acme is full",
    )
    client.force_login(root)
    page = client.get("/queue/")
    assert page.status_code == 200
    assert b"waits" in page.content and b"acme is full" in page.content
    assert b"All tenants' queues" in client.get("/").content
    client.force_login(bob)
    assert client.get("/queue/").status_code == 404
    assert b"All tenants" not in client.get("/").content


# --- extend: one rule for the hours, nothing to extend without a TTL (issue 10, 9 and 18)


@pytest.mark.parametrize("hours", ["2147483648", "0", "-1", "abc", "", "4.5"])
def test_extend_refuses_bad_hours_and_changes_nothing(
    bob: Any, ready_cluster: Any, hours: str
) -> None:
    from clusters.domain import shapes

    before = (ready_cluster.ttl_hours, ready_cluster.expires_at, AuditEvent.objects.count())
    response = client_for(bob).post("/t/acme/clusters/bob-ready/extend/", {"hours": hours})
    assert response.status_code == 400
    assert shapes.EXTEND_HOURS_MESSAGE in response.content.decode()
    ready_cluster.refresh_from_db()
    assert (ready_cluster.ttl_hours, ready_cluster.expires_at, AuditEvent.objects.count()) == before


def test_extend_is_hidden_and_refused_without_a_ttl(alice: Any, request_cluster: Any) -> None:
    forever = make_ready(request_cluster(alice, name="train", kind="prod", workers=1))
    assert forever.ttl_hours is None and forever.expires_at is None
    client = client_for(alice)
    page = client.get("/t/acme/clusters/train/").content.decode()
    assert "Suspend" in page and "+4 h" not in page and "Extend" not in page
    assert "never (no time to live)" in page
    response = client.post("/t/acme/clusters/train/extend/", {"hours": 4})
    assert response.status_code == 409
    assert "nothing to extend" in response.content.decode()
    forever.refresh_from_db()
    assert (forever.ttl_hours, forever.expires_at) == (None, None)


# --- a deleted cluster's final page; the poll follows a deletion to its end (issue 10, 19)


def _finish_deletion(cluster: Any) -> None:
    """What the provision task does once the pods are gone."""
    from django.utils import timezone

    from clusters.rows.transitions import transition

    cluster.refresh_from_db()
    transition(
        cluster,
        State.DELETED,
        reason="deleted",
        message="its pods are gone; GPUs released",
        deleted_at=timezone.now(),
    )


def test_a_deleted_cluster_has_a_final_read_only_page(bob: Any, ready_cluster: Any) -> None:
    client = client_for(bob)
    url = "/t/acme/clusters/bob-ready/"
    assert client.post(url + "delete/").status_code == 302
    deleting = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'data-state="deleting"' in deleting and 'hx-trigger="every 3s"' in deleting
    _finish_deletion(ready_cluster)
    # The page's poll (and the page) move on to the final record: no 404.
    poll = client.get(url + f"?id={ready_cluster.pk}&seen=deleting", HTTP_HX_REQUEST="true")
    assert poll.status_code == 200
    final = poll.content.decode()
    assert 'data-state="deleted"' in final and "hx-trigger" not in final
    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "final record" in html and "badge-deleted" in html
    assert "deleting → deleted" in html and "ready → deleting" in html  # the timeline
    assert "GPU-hour" in html and 'data-gpu-hours="' in html  # its usage
    assert "<button" not in html.split("<main")[1]  # no actions: nothing but the record
    assert "Download YAML" not in html
    # Buttons cannot act on it either.
    assert client.post(url + "suspend/").status_code == 404


def test_the_deleted_filter_links_to_each_deleted_clusters_page(
    bob: Any, ready_cluster: Any, request_cluster: Any
) -> None:
    from clusters.requests import services

    client = client_for(bob)
    services.cluster_delete(actor=bob, cluster=ready_cluster)
    _finish_deletion(ready_cluster)
    again = request_cluster(bob, name="bob-ready")  # the name is free again
    listing = client.get("/t/acme/?state=deleted").content.decode()
    link = f"/t/acme/clusters/bob-ready/?id={ready_cluster.pk}"
    assert f'href="{link}"' in listing
    assert 'data-state="deleted"' in client.get(link).content.decode()
    # Without the id, the name means the live cluster.
    live = client.get("/t/acme/clusters/bob-ready/").content.decode()
    assert 'data-state="queued"' in live and again.state == State.QUEUED


def test_the_queued_banner_goes_when_the_state_moves_on(bob: Any) -> None:
    from clusters.queue.admission_pass import run_admission_pass

    client = client_for(bob)
    response = client.post(
        "/t/acme/clusters/new/", {"name": "bob-new", "kind": "dev", "flavor": "h100", "workers": 1}
    )
    page = client.get(response["Location"]).content.decode()
    assert "bob-new is queued." in page and 'id="messages"' in page
    cluster = ClusterRequest.objects.get(name="bob-new")
    poll_url = f"/t/acme/clusters/bob-new/?id={cluster.pk}&seen=queued"
    assert f'hx-get="{escape(poll_url)}"' in page
    # Same state: the banner stays.
    same = client.get(poll_url, HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-swap-oob="delete"' not in same
    run_admission_pass()
    moved = client.get(poll_url, HTTP_HX_REQUEST="true").content.decode()
    assert '<ul id="messages" hx-swap-oob="delete"></ul>' in moved
    assert 'data-state="admitted"' in moved and "seen=admitted" in moved


def test_suspend_and_delete_ask_first_without_inline_script(bob: Any, ready_cluster: Any) -> None:
    import re

    page = client_for(bob).get("/t/acme/clusters/bob-ready/").content.decode()
    suspend = re.search(r'<form[^>]*action="[^"]*/suspend/"[^>]*>', page)
    delete = re.search(r'<form[^>]*action="[^"]*/delete/"[^>]*>', page)
    assert suspend and 'data-confirm="Suspend bob-ready?' in suspend.group(0)
    assert delete and 'data-confirm="Delete bob-ready?' in delete.group(0)
    assert "onclick" not in page and "onsubmit" not in page
    assert "<script>" not in page  # the confirmation lives in gangway.js


def test_manifests_are_shown_as_yaml_and_downloadable(
    bob: Any, vera: Any, ready_cluster: Any, as_user: Any
) -> None:
    import yaml

    page = client_for(vera).get("/t/acme/clusters/bob-ready/").content.decode()
    assert "<details>" in page and '<pre class="yaml"><code>---' in page
    assert "kind: RayCluster" in page
    download = client_for(vera).get("/t/acme/clusters/bob-ready/manifests.yaml")
    assert download.status_code == 200
    assert download["Content-Disposition"] == 'attachment; filename="bob-ready.yaml"'
    assert download["Content-Type"].startswith("application/yaml")
    api = as_user(vera).get("/api/v1/tenants/acme/clusters/bob-ready/manifests/").json()
    assert list(yaml.safe_load_all(download.content)) == api["manifests"]
    assert client_for(vera).get("/t/acme/clusters/nope/manifests.yaml").status_code == 404


# --- styled 403 and 404 pages that say why (issue 10, 19)


def test_403_and_404_pages_say_why(
    bob: Any, vera: Any, ready_cluster: Any, settings: Any, as_user: Any
) -> None:
    settings.DEBUG = False
    viewer = client_for(vera)
    response = viewer.get("/t/acme/clusters/new/")
    assert response.status_code == 403
    html = response.content.decode()
    assert "Not allowed" in html and 'class="top"' in html  # the dashboard's own page
    assert (
        "Requesting a cluster needs the engineer role in Acme Research; you are a viewer." in html
    )
    response = viewer.post("/t/acme/clusters/bob-ready/suspend/")
    assert response.status_code == 403
    assert "Only the cluster&#x27;s owner or a tenant admin may change it." in (
        response.content.decode()
    )
    missing = client_for(bob).get("/t/acme/clusters/nope/")
    assert missing.status_code == 404
    assert "Acme Research has no cluster named &#x27;nope&#x27;." in missing.content.decode()
    other = client_for(bob).get("/t/globex/")
    assert other.status_code == 404 and "Not found" in other.content.decode()
    assert "not a member of a tenant called &#x27;globex&#x27;" in other.content.decode()
    nowhere = client_for(bob).get("/no/such/page/")
    assert nowhere.status_code == 404 and "There is nothing here" in nowhere.content.decode()
    # The API keeps its JSON error format, matched route or not.
    api = as_user(bob).get("/api/v1/no-such-thing/")
    assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"
    api = as_user(vera).post("/api/v1/tenants/acme/clusters/", {"flavor": "h100"}, format="json")
    assert api.status_code == 403 and api.json()["error"]["code"] == "permission_denied"


# --- messages in plain words (issue 10, 19)


def test_the_verdict_names_fields_by_their_labels(bob: Any) -> None:
    html = (
        client_for(bob)
        .post(VERDICT, {"kind": "dev", "flavor": "h100", "workers": 1, "ttl_hours": 500})
        .content.decode()
    )
    assert 'data-verdict="invalid"' in html
    assert "<li>Time to live: A whole number of hours from 1 to 72" in html
    assert "ttl_hours" not in html.split('id="verdict"')[-1]


def test_an_unknown_flavor_names_the_flavors_there_are(bob: Any, as_user: Any) -> None:
    expected = "Unknown GPU type &#x27;a100&#x27;; choose one of: h100, l4."
    body = {"kind": "dev", "flavor": "a100", "workers": 1}
    html = client_for(bob).post(VERDICT, body).content.decode()
    assert f"<li>Flavor: {expected}</li>" in html
    page = client_for(bob).post("/t/acme/clusters/new/", body)
    assert page.status_code == 400 and expected in page.content.decode()
    for url in ("/api/v1/tenants/acme/clusters/", "/api/v1/tenants/acme/clusters/dry-run/"):
        error = as_user(bob).post(url, body, format="json").json()["error"]
        assert error["fields"]["flavor"] == ["Unknown GPU type 'a100'; choose one of: h100, l4."]


def test_an_autoscaling_cluster_shows_its_range_and_its_whole_charge(alice: Any) -> None:
    response = client_for(alice).post(
        "/t/acme/clusters/new/",
        {"name": "serve", "kind": "prod", "flavor": "h100", "workers": 1, "max_workers": 2},
    )
    assert response.status_code == 302, response.content
    page = client_for(alice).get("/t/acme/clusters/serve/").content.decode()
    assert "(autoscaling 1\N{EN DASH}2)" in page  # it never shrinks below its start
    assert "<dd>16, charged for all it may grow to</dd>" in page


@pytest.mark.parametrize("ttl", ["0", "1.5", "73"])
def test_verdict_panel_refuses_a_ttl_in_the_rule_the_form_bounds_come_from(
    bob: Any, ttl: str
) -> None:
    client = client_for(bob)
    html = client.post(VERDICT, {"kind": "dev", "flavor": "h100", "workers": 1, "ttl_hours": ttl})
    text = html.content.decode()
    assert 'data-verdict="invalid"' in text
    assert "A whole number of hours from 1 to 72 (the tenant&#x27;s maximum TTL)." in text
    form = client.get("/t/acme/clusters/new/").content.decode()
    assert 'name="ttl_hours" min="1" max="72"' in form
