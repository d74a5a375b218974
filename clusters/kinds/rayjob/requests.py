"""Engineers' writes on jobs: submit, stop, delete.

A job is checked with the same code as a cluster request — role, shape, name, "can it
ever fit", per-engineer caps (:func:`clusters.requests.services.cluster_request_check`)
— plus its own fields (entrypoint, ``runtime_env``, limits, the host cluster), every
fault at once. It is written in state ``queued`` and waits in the one queue; a job on
one of its owner's ready dev clusters takes no GPUs and skips the queue (``starting``
at once). Every move goes through :func:`clusters.rows.transitions.transition`, audited in
the same transaction, with the work asked for after commit.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from clusters.admission.snapshot import FITS_NOW
from clusters.domain import shapes
from clusters.domain.states import State
from clusters.domain.workload_kinds import interactive_workloads
from clusters.kinds.rayjob.kind import KIND as JOB_KIND
from clusters.kinds.rayjob.runtime_env import validate_runtime_env
from clusters.kinds.rayjob.spec import (
    MAX_DEADLINE_SECONDS,
    MAX_ENTRYPOINT,
    MAX_JOB_NAME,
    MAX_TTL_AFTER_FINISHED,
    JobSpec,
)
from clusters.kinds.rayjob.states import JOB_FINISHED
from clusters.kube.manifests import cluster_manifests
from clusters.models import ClusterKind, ClusterRequest, Job
from clusters.queue.backends import manifest_options, queue_backend
from clusters.requests import rules
from clusters.requests import services as requests
from clusters.requests.dry_run import dry_run_verdict
from clusters.requests.locked_reads import LockedReads, lock_and_read
from clusters.rows import enqueue, lifecycle
from clusters.rows.spec import ClusterSpec
from clusters.rows.transitions import first_note, transition
from controlplane.exceptions import ServiceConflict
from tenants.audit import audit_record
from tenants.models import Tenant
from tenants.selectors import role_in_tenant

# A dry-run job named by nobody is shown with this name (submission generates one).
DRY_RUN_JOB_NAME = "dry-run-job"
STOPPABLE = frozenset({State.QUEUED, State.ADMITTED, State.STARTING, State.RUNNING})


# Why a job without a shape or a host is refused.
NO_FLAVOR = (
    "Name a GPU flavor (flavor, or several in order of preference as flavors), or a ready "
    "dev cluster of yours as cluster."
)


def _job_field_errors(
    job: JobSpec, *, tenant: Tenant
) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The checks of the job's own fields (the tenant's policy decides whether pip may
    install from direct URLs); returns the cleaned runtime_env and faults."""
    errors: dict[str, list[str]] = {}
    entrypoint = job.entrypoint.strip()
    if not entrypoint:
        errors["entrypoint"] = ['Give the command that starts the driver, e.g. "python train.py".']
    elif len(entrypoint) > MAX_ENTRYPOINT:
        errors["entrypoint"] = [f"At most {MAX_ENTRYPOINT} characters."]
    elif "\x00" in entrypoint:
        errors["entrypoint"] = ["The command may not contain NUL characters."]
    runtime_env, env_errors = validate_runtime_env(
        job.runtime_env, allow_pip_direct_urls=tenant.allow_pip_direct_urls
    )
    errors.update(env_errors)
    deadline = job.active_deadline_seconds
    if deadline is not None and not (1 <= deadline <= MAX_DEADLINE_SECONDS):
        errors["active_deadline_seconds"] = [
            f"Between 1 and {MAX_DEADLINE_SECONDS} seconds (7 days), or leave it out."
        ]
    if not (0 <= job.ttl_seconds_after_finished <= MAX_TTL_AFTER_FINISHED):
        errors["ttl_seconds_after_finished"] = [
            f"Between 0 and {MAX_TTL_AFTER_FINISHED} seconds (7 days)."
        ]
    return runtime_env, errors


def _name_errors(*, tenant: Tenant, name: str | None) -> list[str]:
    if not name:
        return []
    if len(name) > MAX_JOB_NAME:
        return [f"At most {MAX_JOB_NAME} characters (KubeRay names the job's cluster after it)."]
    try:
        shapes.validate_name(name)
    except ValidationError as exc:
        return list(exc.message_dict["name"])
    if requests.name_taken(tenant=tenant, name=name):
        return [
            f"A cluster or job named {name!r} already exists in {tenant.slug}; choose another name."
        ]
    return []


def _host(*, actor: Any, tenant: Tenant, name: str) -> tuple[ClusterRequest | None, str]:
    """The dev cluster a job would run on, or why it cannot."""
    host = (
        ClusterRequest.objects.unscoped()
        .filter(tenant=tenant, name=name, workload__in=interactive_workloads())
        .exclude(state=State.DELETED)
        .select_related("flavor")
        .first()
    )
    if host is None:
        return None, f"You have no cluster named {name!r} in {tenant.slug}."
    if host.owner_id != getattr(actor, "pk", None):
        return None, f"{name} is not yours: a job can run only on one of your own dev clusters."
    if host.kind != ClusterKind.DEV:
        return None, f"{name} is a production cluster; a job can run only on a dev cluster."
    if host.state != State.READY:
        return None, f"{name} is {host.state}; a job can run only on a ready cluster."
    return host, ""


def _hosted_pod_faults(*, job: JobSpec, host: ClusterRequest) -> dict[str, list[str]]:
    """A job on a host runs in the host's pods, which already run: it may name the
    host's image (or none), and set no pod environment or container opt-in of its own."""
    faults: dict[str, list[str]] = {}
    image = host.image or settings.RAY_IMAGE_DEFAULT
    if job.image and job.image != image:
        faults["image"] = [
            f"A job on {host.name} runs in that cluster's image, {image}; leave image out "
            "or name that one."
        ]
    if job.env:
        faults["env"] = [
            f"A job on {host.name} runs in that cluster's pods, whose environment is set; "
            "give the job's own variables as runtime_env.env_vars."
        ]
    if job.container_gpus and not host.container_gpus:
        faults["container_gpus"] = [
            f"{host.name} was not created with container_gpus; a job cannot add it to a "
            "running cluster."
        ]
    return faults


def job_check(
    *,
    actor: Any,
    tenant: Tenant,
    spec: ClusterSpec | None,
    job: JobSpec,
    role: str | None = None,
    reads: LockedReads | None = None,
) -> tuple[ClusterRequest, Job]:
    """Every check a job must pass to be queued; returns the unsaved request and job.

    The job's own faults and the shape's are reported together. A job with a ``host``
    is checked against that cluster (yours, dev, ready) instead of the catalogue: it
    asks for no GPUs of its own, and ``spec`` is ``None`` (the host's shape is used).
    A job that could never fit raises :class:`~clusters.requests.services.NeverFits`
    about an unsaved job request (its ``cluster`` carries the job's details, for the
    dry-run's manifest). ``reads``: what the create read with the tenant's lock.
    """
    kind = spec.kind if spec is not None else ClusterKind.DEV
    role = role or role_in_tenant(user=actor, tenant=tenant)
    if not rules.may_request(role=role, kind=kind):
        raise PermissionDenied(rules.requester_refusal(tenant=tenant, role=role, kind=kind))
    runtime_env, errors = _job_field_errors(job, tenant=tenant)
    name = job.name or (spec.name if spec is not None else None)
    name_faults = _name_errors(tenant=tenant, name=name)
    if name_faults:
        errors["name"] = name_faults
    host: ClusterRequest | None = None
    if job.host:
        host, fault = _host(actor=actor, tenant=tenant, name=job.host)
        if fault:
            errors["cluster"] = [fault]
        else:
            assert host is not None
            errors.update(_hosted_pod_faults(job=job, host=host))
    details = Job(
        entrypoint=job.entrypoint.strip(),
        runtime_env=runtime_env,
        active_deadline_seconds=job.active_deadline_seconds,
        ttl_seconds_after_finished=job.ttl_seconds_after_finished,
        host=host,
    )
    if job.host or spec is None:
        if spec is None and not job.host:
            errors["flavor"] = [NO_FLAVOR]
        if errors:
            raise ValidationError(errors)
        assert host is not None
        request = ClusterRequest(
            tenant=tenant,
            owner=actor,
            workload=JOB_KIND.workload,
            name=name or _default_name(actor),
            kind=ClusterKind.DEV,
            flavor=host.flavor,
            workers=0,
            image=host.image,
            env=dict(host.env or {}),
            container_gpus=host.container_gpus,
            gpus=Decimal(0),
            cpu=Decimal(0),
            memory_gib=Decimal(0),
        )
        request._job_details = details  # type: ignore[attr-defined]
        return request, details
    checked = replace(spec, name=name or _default_name(actor))
    request = requests.kind_request_check(
        kind=JOB_KIND,
        details=details,
        details_attr="_job_details",
        errors=errors,
        actor=actor,
        tenant=tenant,
        spec=checked,
        role=role,
        check_name=False,
        reads=reads,
    )
    return request, details


def _default_name(actor: Any) -> str:
    name = shapes.default_name(
        owner_username=actor.get_username(), kind="job", suffix=secrets.token_hex(3)
    )
    if len(name) <= MAX_JOB_NAME:
        return name
    return f"{name[: MAX_JOB_NAME - 11].rstrip('-')}-{name[-10:]}"


def _where(request: ClusterRequest, details: Job) -> str:
    """Where a job was submitted to run, as its timeline says: the dev cluster, or the
    flavors it accepts (which it gets is said when it is admitted)."""
    if details.host:
        return f"on {details.host.name}"
    accepted = list(request.accepted_flavors or [])
    if len(accepted) > 1:
        return f"accepts {', '.join(accepted)}, in that order"
    return f"on {request.flavor.name}"


def job_create(
    *,
    actor: Any,
    tenant: Tenant,
    spec: ClusterSpec | None,
    job: JobSpec,
    role: str | None = None,
) -> ClusterRequest:
    """Check a job (:func:`job_check`) and queue it; see the module docstring."""
    with transaction.atomic():
        reads = None
        if spec is None or job.host:
            Tenant.objects.lock(tenant.pk)  # a hosted job reads none of what the lock guards
        else:
            reads = lock_and_read(tenant=tenant, owner=actor, name="", flavor=spec.flavor)
        request, details = job_check(
            actor=actor, tenant=tenant, spec=spec, job=job, role=role, reads=reads
        )
        # Its RayJob is written at once, suspended while it waits (DESIGN "States"), by
        # the provision pass; a backend that queues in the cluster asks for that itself.
        marked = bool(details.host) or not queue_backend().provisions_queued
        if marked:
            request.provision_requested_at = timezone.now()
        event = first_note(
            request,
            reason="requested",
            message=f"job submitted ({_where(request, details)})",
            actor=actor,
        )
        audit = requests.create_audit(
            actor=actor,
            action="job.create",
            request=request,
            tenant=tenant,
            host=details.host.name if details.host else None,
        )
        requests.kind_request_save(request, details, event=event, audit=audit)
        if spec is not None and requests.budget_lowered(request, spec):
            requests.note_budget(request, actor=actor)
        if details.host:
            # Nothing to admit: it runs on GPUs its owner already holds.
            transition(
                request,
                State.STARTING,
                reason="hosted",
                message=f"submitting to {details.host.name}",
                admitted_at=timezone.now(),
            )
        else:
            queue_backend().request_queued(request.pk)
        if marked:
            enqueue.provision_marked()
    return request


def job_stop(*, actor: Any, request: ClusterRequest, role: str | None = None) -> ClusterRequest:
    """Stop a job that has not ended: ``stopped`` at once; its RayJob is deleted and its
    GPUs are released once its pods are gone. Stopping a finished job is refused
    (``ServiceConflict`` ``invalid_state``)."""
    if not rules.can_manage(actor=actor, cluster=request, role=role):
        raise PermissionDenied("Only the job's owner or a tenant admin may stop it.")
    with transaction.atomic():
        request = lifecycle.locked(request)
        if request.state == State.STOPPED:
            return request
        if request.state not in STOPPABLE:
            ended = "has ended" if request.state in JOB_FINISHED else "is being deleted"
            raise ServiceConflict(
                f"{request.name} {ended} ({request.state}); there is nothing to stop.",
                code="invalid_state",
            )
        now = timezone.now()
        transition(
            request,
            State.STOPPED,
            reason="stopped",
            actor=actor,
            message="stopped by request; its GPUs are released once its pods are gone",
            provision_requested_at=now,
        )
        Job.objects.filter(pk=request.pk, ended_at__isnull=True).update(ended_at=now)
        audit_record(actor=actor, action="job.stop", obj=request, tenant=request.tenant)
        enqueue.provision_marked()
        enqueue.admission_pass()
    return request


def job_delete(*, actor: Any, request: ClusterRequest, role: str | None = None) -> ClusterRequest:
    """Delete a job (stopping it if it runs); its GPUs are released once its pods are gone."""
    return requests.cluster_delete(actor=actor, cluster=request, role=role)


def job_dry_run(
    *, tenant: Tenant, owner: Any, spec: ClusterSpec | None, job: JobSpec, role: str | None = None
) -> dict[str, Any]:
    """The dry-run verdict of a job (:func:`clusters.requests.dry_run.dry_run_verdict`
    with the job's own checks); a job on one of its owner's clusters waits for nothing."""
    role = role or role_in_tenant(user=owner, tenant=tenant)

    def check(candidate: ClusterSpec | None) -> ClusterRequest:
        return job_check(actor=owner, tenant=tenant, spec=candidate, job=job, role=role)[0]

    if job.host:
        return _hosted_verdict(check(spec), job.host)
    assert spec is not None
    return dry_run_verdict(
        tenant=tenant,
        owner=owner,
        spec=spec,
        role=role,
        kind_check=check,
        default_name="" if job.name else DRY_RUN_JOB_NAME,
    )


def _hosted_verdict(job: ClusterRequest, host: str) -> dict[str, Any]:
    """A job on one of its owner's ready clusters waits for nothing: it takes no GPUs."""
    if not job.name:
        job.name = DRY_RUN_JOB_NAME
    return {
        "verdict": FITS_NOW,
        "headline": f"Starts now on {host}; it takes no new GPUs.",
        "reasons": [
            {"code": "hosted", "message": f"It runs on {host}, whose GPUs you already hold."}
        ],
        "summary": f"Starts now on {host}; it takes no new GPUs.",
        "position": None,
        "flavor_position": None,
        "eta": None,
        "eta_text": "",
        "alternatives": [],
        "flavor": None,
        "kube_cluster": None,  # it runs where its host runs
        "flavors": [],
        "budget_note": "",
        "as_of": timezone.now(),  # the queue is not read: nothing waits
        "manifests": cluster_manifests(job, **manifest_options()),
    }
