"""Draining a member: each kind's policy, the engine's drain step (requeue, notices once,
drained when empty, safe to run twice), time to re-place, and who may drain by the API
and the command (platform admins only; a bad mode is refused and changes nothing)."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from clusters.domain.states import State
from clusters.domain.workload_kinds import REQUEUE, WAIT, kind_named
from clusters.engine import member_drain
from clusters.members import selectors, services
from clusters.models import ClusterEvent, ClusterRequest, Job, KubeCluster
from notifications.event_kinds import EventKind, derive
from tenants.models import AuditEvent

pytestmark = pytest.mark.django_db

URL = "/api/v1/platform/kube-clusters/"


@pytest.fixture
def cloud() -> KubeCluster:
    # Unreachable: the step deletes nothing there now (its pass would, once back).
    return KubeCluster.objects.create(
        name="cloud", server="http://127.0.0.1:9", placement_order=5, reachable=False
    )


def test_each_kind_says_what_a_drain_does_to_it_and_the_requeue_mode_moves_jobs_too() -> None:
    assert kind_named("cluster").drain_action("default") == REQUEUE
    assert kind_named("service").drain_action("default") == REQUEUE
    assert kind_named("job").drain_action("default") == WAIT
    assert kind_named("job").drain_action("requeue") == REQUEUE
    assert kind_named("cluster").drain_action("requeue") == REQUEUE


def test_a_drain_step_requeues_clusters_tells_job_owners_once_and_ends_drained(
    root: Any, make_cluster: Any, cloud: KubeCluster
) -> None:
    now = timezone.now()
    dev = make_cluster(name="dev", state=State.READY, holds_gpus=True, kube_cluster=cloud)
    dev.admitted_at = now
    dev.save()
    job = make_cluster(name="train", workload="job", state=State.RUNNING, kube_cluster=cloud)
    job.save()
    elsewhere = make_cluster(name="other", state=State.READY, kube_cluster=None)
    elsewhere.save()

    member = services.kube_cluster_drain(actor=root, member=cloud)
    assert (member.schedulable, member.drain_mode) == ("draining", "default")
    # The request only marks the drain: the engine's step carries it out, so a crash
    # after it (or a lost nudge) leaves a drain that the next step finds.
    assert ClusterRequest.objects.get(name="dev").state == State.READY
    before = selectors.drain_progress([member])[member.pk]
    assert (before.requeue, before.wait, before.remaining) == (1, 1, 2)

    moved = member_drain.drain_step(member)
    assert [r.name for r in moved] == ["dev"]
    dev.refresh_from_db()
    assert (dev.state, dev.kube_cluster_id, dev.holds_gpus) == (State.QUEUED, None, False)
    assert "cloud is being drained" in dev.queue_message
    job.refresh_from_db()
    assert job.state == State.RUNNING and job.kube_cluster_id == cloud.pk
    assert ClusterRequest.objects.get(name="other").state == State.READY  # not on cloud

    # The owners' notices: the move back to the queue and a note for the job.
    (requeued,) = ClusterEvent.objects.filter(cluster=dev, reason="member_drain")
    assert (requeued.from_state, requeued.to_state) == (State.READY, State.QUEUED)
    (waits,) = ClusterEvent.objects.filter(cluster=job, reason="member_drain")
    assert "runs to its end where it is" in waits.message
    for event in (requeued, waits):
        found = derive(
            from_state=event.from_state,
            to_state=event.to_state,
            reason=event.reason,
            finished=kind_named(event.cluster.workload).finished,
        )
        assert found is not None and found.kind == EventKind.MEMBER_DRAIN

    # Again (a crash, a second worker): nothing moves twice, nobody is told twice.
    member.refresh_from_db()
    assert member_drain.drain_step(member) == []
    assert ClusterEvent.objects.filter(reason="member_drain").count() == 2
    member.refresh_from_db()
    assert member.moving == [dev.pk] and member.drained_at is None
    progress = selectors.drain_progress([member])[member.pk]
    assert (progress.requeue, progress.wait, progress.awaiting_placement) == (0, 1, 1)

    # The job ends; the cluster is admitted elsewhere: drained, and the move timed.
    ClusterRequest.objects.filter(pk=job.pk).update(state=State.SUCCEEDED)
    home = KubeCluster.objects.get(from_settings=True)
    later = member.drain_started_at + timedelta(seconds=7)
    ClusterRequest.objects.filter(pk=dev.pk).update(
        state=State.ADMITTED, kube_cluster=home, admitted_at=later
    )
    member_drain.fleet_step()
    member.refresh_from_db()
    assert member.drained_at is not None
    assert member.moving == [] and member.moving_since is None
    assert member.replace_seconds == pytest.approx(7.0)
    assert selectors.drain_progress([member])[member.pk].remaining == 0


def test_the_requeue_mode_requeues_jobs_too(
    root: Any, make_cluster: Any, cloud: KubeCluster
) -> None:
    job = make_cluster(name="train", workload="job", state=State.RUNNING, kube_cluster=cloud)
    job.save()
    member = services.kube_cluster_drain(actor=root, member=cloud, mode="requeue")
    assert [r.name for r in member_drain.drain_step(member)] == ["train"]
    job.refresh_from_db()
    assert job.state == State.QUEUED and job.kube_cluster_id is None
    assert "run again on another cluster" in job.queue_message


@pytest.mark.parametrize("mode", ["default", "requeue"])
def test_a_dev_cluster_hosting_a_running_job_stays_until_the_job_ends(
    root: Any, make_cluster: Any, cloud: KubeCluster, mode: str
) -> None:
    host = make_cluster(name="dev", state=State.READY, holds_gpus=True, kube_cluster=cloud)
    host.save()
    hosted = make_cluster(name="train", workload="job", state=State.RUNNING, kube_cluster=cloud)
    hosted.save()
    Job.objects.create(request=hosted, entrypoint="python train.py", host=host)
    member = services.kube_cluster_drain(actor=root, member=cloud, mode=mode)
    progress = selectors.drain_progress([member])[member.pk]
    assert (progress.requeue, progress.wait) == (0, 2)

    # Neither moves in either mode: the job runs on its host's Ray cluster.
    assert member_drain.drain_step(member) == []
    host.refresh_from_db()
    hosted.refresh_from_db()
    assert (host.state, host.kube_cluster_id) == (State.READY, cloud.pk)
    assert (hosted.state, hosted.kube_cluster_id) == (State.RUNNING, cloud.pk)
    (told,) = ClusterEvent.objects.filter(cluster=host, reason="member_drain")
    assert "runs the job train (submitted with --on), so it stays until they end" in told.message
    assert ClusterEvent.objects.filter(cluster=hosted, reason="member_drain").count() == 1
    member.refresh_from_db()
    assert member_drain.drain_step(member) == []  # told once
    assert ClusterEvent.objects.filter(reason="member_drain").count() == 2

    # The job ends: the host moves at the next step, and the member ends drained.
    ClusterRequest.objects.filter(pk=hosted.pk).update(state=State.SUCCEEDED)
    assert [r.name for r in member_drain.drain_step(member)] == ["dev"]
    host.refresh_from_db()
    assert host.state == State.QUEUED
    member.refresh_from_db()
    assert member.drained_at is not None


def test_uncordon_ends_a_drain(root: Any, cloud: KubeCluster) -> None:
    services.kube_cluster_drain(actor=root, member=cloud)
    member = services.kube_cluster_set_schedulable(actor=root, member=cloud, schedulable="active")
    member.refresh_from_db()
    assert (member.schedulable, member.drain_mode, member.drain_started_at) == ("active", "", None)
    assert selectors.drain_progress([member]) == {}


def test_only_platform_admins_drain_and_a_bad_mode_is_a_400_that_changes_nothing(
    as_user: Any, root: Any, alice: Any, cloud: KubeCluster
) -> None:
    assert as_user(alice).post(URL + "cloud/drain/", {}, format="json").status_code == 403
    api = as_user(root)
    audits = AuditEvent.objects.count()
    bad = api.post(URL + "cloud/drain/", {"mode": "evict"}, format="json")
    assert bad.status_code == 400 and "mode" in bad.json()["error"]["fields"], bad.content
    cloud.refresh_from_db()
    assert (cloud.schedulable, cloud.drain_mode, cloud.drain_started_at) == ("active", "", None)
    assert AuditEvent.objects.count() == audits

    drained = api.post(URL + "cloud/drain/", {"mode": "requeue"}, format="json")
    assert drained.status_code == 200, drained.content
    body = drained.json()
    assert body["schedulable"] == "draining"
    assert body["drain"]["mode"] == "requeue" and body["drain"]["remaining"] == 0
    assert body["health"]["detect_seconds"] is None and body["health"]["replace_seconds"] is None
    (audit,) = AuditEvent.objects.filter(action="kube_cluster.drain")
    assert audit.data["mode"] == "requeue"
    listed = {m["name"]: m for m in api.get(URL).json()["results"]}
    assert listed["cloud"]["drain"]["started_at"] and listed["default"]["drain"] is None
    assert api.post(URL + "cloud/uncordon/").json()["drain"] is None


def test_the_command_drains_and_refuses_a_bad_mode_or_a_non_admin(
    root: Any, alice: Any, cloud: KubeCluster
) -> None:
    def run(*args: str) -> str:
        out = io.StringIO()
        call_command("kubecluster", *args, stdout=out)
        return out.getvalue()

    with pytest.raises(CommandError, match="Only platform admins"):
        run("--as", "alice", "drain", "cloud")
    with pytest.raises(CommandError, match="'evict' is not one of"):
        run("--as", "root", "drain", "cloud", "--mode", "evict")
    cloud.refresh_from_db()
    assert cloud.schedulable == "active" and cloud.drain_mode == ""
    said = run("--as", "root", "drain", "cloud", "--mode", "requeue")
    assert said.startswith("cloud is draining (requeue): 0 to be requeued"), said
    cloud.refresh_from_db()
    assert (cloud.schedulable, cloud.drain_mode) == ("draining", "requeue")
