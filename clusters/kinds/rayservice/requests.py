"""Engineers' writes on services: create, update (an upgrade, the idle policy), delete,
and the dry-run.

A service is checked with the same code as a cluster request — role, shape, name,
"can it ever fit", per-engineer caps (:func:`clusters.requests.services.cluster_request_check`)
— plus its Serve config, upgrade strategy and idle policy, every fault at once. It waits
in the one queue and is charged as a cluster of its shape is. A new Serve config or image
is an upgrade: the provision pass applies the RayService again; a new image for a service
that serves waits first for its second cluster's surge (:mod:`.upgrade`).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from clusters.domain import request_validation
from clusters.domain.states import State
from clusters.kinds.rayservice import upgrade
from clusters.kinds.rayservice.kind import KIND as SERVICE_KIND
from clusters.kinds.rayservice.manifests import autoscales
from clusters.kinds.rayservice.spec import (
    MAX_SERVICE_NAME,
    ServiceSpec,
    validate_idle_window,
    validate_service,
)
from clusters.models import ClusterRequest, Service, Surge
from clusters.queue.backends import queue_backend
from clusters.requests import rules
from clusters.requests import services as requests
from clusters.requests.dry_run import dry_run_verdict
from clusters.requests.locked_reads import LockedReads, lock_and_read
from clusters.rows import lifecycle, surges
from clusters.rows.spec import ClusterSpec
from clusters.rows.transitions import first_note, note
from controlplane.exceptions import ServiceConflict
from tenants.audit import audit_record
from tenants.models import Tenant

# Where a service may change: every live state (a scaled-to-zero service's new Serve
# config or image is written on the row and applied when it wakes).
UPDATABLE = frozenset({State.QUEUED, State.SUSPENDED, *upgrade.APPLIED})


def _details(service: ServiceSpec, errors: dict[str, list[str]], *, autoscaling: bool) -> Service:
    try:
        validate_service(service, autoscales=autoscaling)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    return Service(
        serve_config=service.serve_config,
        upgrade_type=service.upgrade_type,
        upgrade_options=dict(service.upgrade_options),
        scale_to_zero=service.scale_to_zero,
        scale_to_zero_after_minutes=service.scale_to_zero_after_minutes,
    )


def service_check(
    *,
    actor: Any,
    tenant: Tenant,
    spec: ClusterSpec,
    service: ServiceSpec,
    role: str | None = None,
    reads: LockedReads | None = None,
) -> tuple[ClusterRequest, Service]:
    """Every check a service must pass to be queued; the unsaved request and details.
    Raises as :func:`~clusters.requests.services.cluster_request_check` does, with the
    service's own faults reported together with the shape's. ``reads``: what the create
    read with the tenant's lock."""
    errors: dict[str, list[str]] = {}
    if spec.name and len(spec.name) > MAX_SERVICE_NAME:
        errors["name"] = [
            f"At most {MAX_SERVICE_NAME} characters "
            "(KubeRay names the service's clusters after it)."
        ]
    probe = ClusterRequest(**spec.shape())
    details = _details(service, errors, autoscaling=autoscales(probe))
    request = requests.kind_request_check(
        kind=SERVICE_KIND,
        details=details,
        details_attr="_service_details",
        errors=errors,
        actor=actor,
        tenant=tenant,
        spec=spec,
        role=role,
        reads=reads,
    )
    return request, details


def service_create(
    *, actor: Any, tenant: Tenant, spec: ClusterSpec, service: ServiceSpec, role: str | None = None
) -> ClusterRequest:
    """Check a service (:func:`service_check`) and queue it."""
    with transaction.atomic():
        reads = lock_and_read(tenant=tenant, owner=actor, name=spec.name or "", flavor=spec.flavor)
        request, details = service_check(
            actor=actor, tenant=tenant, spec=spec, service=service, role=role, reads=reads
        )
        event = first_note(request, reason="requested", message="service requested", actor=actor)
        audit = requests.create_audit(
            actor=actor,
            action="service.create",
            request=request,
            tenant=tenant,
            upgrade=details.upgrade_type,
        )
        requests.kind_request_save(request, details, event=event, audit=audit)
        queue_backend().request_queued(request.pk)
    return request


def service_update(
    *,
    actor: Any,
    request: ClusterRequest,
    serve_config: str | None = None,
    image: str | None = None,
    scale_to_zero: bool | None = None,
    scale_to_zero_after_minutes: int | None = None,
    role: str | None = None,
) -> ClusterRequest:
    """Change a service: its idle policy and/or an upgrade (a new Serve config and/or
    image). A new image for a service that serves brings a second Ray cluster up: the
    change waits for that surge's admission (:mod:`clusters.kinds.rayservice.upgrade`);
    anything else is applied at once. Refused (``ServiceConflict``) once it is being
    deleted or failed, or an upgrade while an admitted one is under way; the whole
    change is one transaction, so nothing changes on a 4xx."""
    if not rules.can_manage(actor=actor, cluster=request, role=role):
        raise PermissionDenied("Only the service's owner or a tenant admin may change it.")
    if scale_to_zero_after_minutes is not None:
        validate_idle_window(scale_to_zero_after_minutes)
    with transaction.atomic():
        request = lifecycle.locked(request)
        if request.state not in UPDATABLE:
            raise ServiceConflict(
                f"{request.name} is {request.state}; it can no longer be changed.",
                code="invalid_state",
            )
        details = Service.objects.select_for_update().get(pk=request.pk)
        _idle_policy(actor, request, details, scale_to_zero, scale_to_zero_after_minutes)
        if serve_config is not None or image:
            _upgrade(actor, request, details, serve_config, image)
    return request


def _idle_policy(
    actor: Any, request: ClusterRequest, details: Service, on: bool | None, minutes: int | None
) -> None:
    """Write a changed idle policy on the locked details, with an event and an audit."""
    changed = {
        name: value
        for name, value in (("scale_to_zero", on), ("scale_to_zero_after_minutes", minutes))
        if value is not None and getattr(details, name) != value
    }
    if not changed:
        return
    for name, value in changed.items():
        setattr(details, name, value)
    details.save(update_fields=list(changed))
    said = (
        f"scale to zero after {details.scale_to_zero_after_minutes} min without requests"
        if details.scale_to_zero
        else "scale to zero off"
    )
    note(request, reason="idle_policy", message=said, actor=actor)
    audit_record(
        actor=actor, action="service.update", obj=request, tenant=request.tenant, data=changed
    )


def _upgrade(
    actor: Any,
    request: ClusterRequest,
    details: Service,
    serve_config: str | None,
    image: str | None,
) -> None:
    """The upgrade part of :func:`service_update`, on the locked row and details."""
    waiting = Surge.objects.select_for_update().filter(pk=request.pk).first()
    if waiting is not None and waiting.admitted_at is not None:
        raise ServiceConflict(
            f"{request.name} is being upgraded; change it again once the upgrade is over.",
            code="upgrade_in_progress",
        )
    # What is asked, over what an upgrade waiting for its surge already asks.
    before = waiting.change if waiting is not None else {}
    config_now = before.get("serve_config", details.serve_config)
    image_now = before.get("image") or request.image
    change = dict(before)
    if serve_config is not None and serve_config != config_now:
        asked = ServiceSpec(
            serve_config=serve_config,
            upgrade_type=details.upgrade_type,
            upgrade_options=details.upgrade_options,
            scale_to_zero_after_minutes=details.scale_to_zero_after_minutes,
        )
        validate_service(asked, autoscales=autoscales(request))
        change["serve_config"] = serve_config
    if image and image != image_now:
        allowed = list(settings.RAY_IMAGE_ALLOWLIST)
        if image not in allowed:
            raise ValidationError({"image": [request_validation.image_refusal(image, allowed)]})
        change["image"] = image
    if change == before:
        return
    _forwarded_or_refused(request, change)
    said = " and ".join(_asked(change, before))
    if change.get("image", request.image) != request.image and upgrade.takes_new_cluster(
        request, details
    ):
        surge = upgrade.record(request, details, change)
        note(
            request,
            reason="upgrade_queued",
            message=f"new {said}: the upgrade waits for {surges.words(surge)} "
            "for its new Ray cluster",
            actor=actor,
        )
    else:
        upgrade.carry_out(request, details, change)
        if waiting is not None:
            waiting.delete()
        note(request, reason="upgrade", message=f"new {said}", actor=actor)
    audit_record(
        actor=actor,
        action="service.update",
        obj=request,
        tenant=request.tenant,
        data={"changed": _asked(change, before)},
    )


def _forwarded_or_refused(request: ClusterRequest, change: dict[str, Any]) -> None:
    """Refuse a new image for a service that runs from a MultiKueue copy: Kueue forwards
    only a new Serve config to the worker, so the image would change on the manager's
    original and never where the service runs."""
    if change.get("image", request.image) == request.image:
        return
    if request.state not in upgrade.APPLIED or not queue_backend().runs_a_copy(request):
        return
    raise ServiceConflict(
        f"{request.name} runs on {request.kube_cluster}, dispatched there by MultiKueue, "
        "which forwards only a new Serve config to it (Kueue v0.19), not a new image. "
        "Change its image while it is scaled to zero (it wakes with it), or delete it and "
        "create it again with the new image.",
        code="not_forwarded",
    )


def _asked(change: dict[str, Any], before: dict[str, Any]) -> list[str]:
    """What a PATCH asks anew, in words (["Serve config", "image rayproject/ray:..."])."""
    said: list[str] = []
    if change.get("serve_config") != before.get("serve_config"):
        said.append("Serve config")
    if change.get("image") != before.get("image"):
        said.append(f"image {change['image']}")
    return said


def service_delete(
    *, actor: Any, request: ClusterRequest, role: str | None = None
) -> ClusterRequest:
    """Delete a service; its GPUs are released once its pods are gone."""
    return requests.cluster_delete(actor=actor, cluster=request, role=role)


def service_dry_run(
    *, tenant: Tenant, owner: Any, spec: ClusterSpec, service: ServiceSpec, role: str | None
) -> dict[str, Any]:
    """The dry-run verdict of a service (:func:`clusters.requests.dry_run.dry_run_verdict`
    with the service's own checks: its RayService as the manifest). Writes nothing."""

    def check(candidate: ClusterSpec) -> ClusterRequest:
        return service_check(
            actor=owner, tenant=tenant, spec=candidate, service=service, role=role
        )[0]

    return dry_run_verdict(tenant=tenant, owner=owner, spec=spec, role=role, kind_check=check)
