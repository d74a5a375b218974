"""Writes to the fleet's members (platform admins only, each audited): register one,
change it, cordon, uncordon or drain it, remove it, check it, rotate the keys its
secrets are sealed with. A change of credentials is checked against the API server
before anything is saved (:mod:`clusters.members.checks`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from clusters.kube.connection import gateway_for, own_gateway_for
from clusters.kube.errors import KubeError
from clusters.members import checks
from clusters.members.selectors import kube_cluster_references
from clusters.models import ClusterRequest, DrainMode, KubeCluster, Schedulable
from clusters.rows import enqueue
from controlplane.exceptions import ServiceConflict
from controlplane.sealed import UnsealError, reseal, seal
from tenants.audit import audit_record
from tenants.models import Tenant
from tenants.services.guards import require_platform_admin

# How gangway signs in: changing any of these is checked against the API server first.
CREDENTIALS = (
    "server",
    "ca_data",
    "insecure_skip_tls_verify",
    "token",
    "client_certificate",
    "client_key",
)
PLACEMENT = ("region", "labels", "placement_order")
EDITABLE = frozenset({*CREDENTIALS, *PLACEMENT, "allowed_tenants"})
SEALED = {"token": "token_encrypted", "client_key": "client_key_encrypted"}


class CredentialsRefused(ValidationError):
    """The API server, with the credentials given, fails the check (a 400 that says why)."""

    error_code = "credentials_refused"


@dataclass(frozen=True)
class CheckReport:
    """A check of a saved member: whether it passed, and what failed if not."""

    passed: bool
    message: str


def _audit_data(member: KubeCluster) -> dict[str, Any]:
    """What an audit event says of a member: never a secret, only whether it has one."""
    return {
        "name": member.name,
        "server": member.server,
        "insecure_skip_tls_verify": member.insecure_skip_tls_verify,
        "has_token": bool(member.token_encrypted),
        "has_client_certificate": bool(member.client_certificate),
        "region": member.region,
        "labels": member.labels,
        "placement_order": member.placement_order,
        "schedulable": member.schedulable,
        "allowed_tenants": sorted(t.slug for t in member.allowed_tenants.all())
        if member.pk
        else [],
    }


def _sign_in(member: KubeCluster, values: Mapping[str, Any]) -> None:
    """Set how ``member`` signs in from ``values``: a token or a client certificate and
    key (giving one way clears the other), secrets sealed with the first fleet key."""
    for name in ("server", "ca_data", "insecure_skip_tls_verify"):
        if name in values:
            setattr(member, name, values[name])
    token = values.get("token") or ""
    certificate = values.get("client_certificate") or ""
    key = values.get("client_key") or ""
    if token and (certificate or key):
        raise ValidationError(
            {"token": ["Give a token or a client certificate and key, not both."]}
        )
    if bool(certificate) != bool(key):
        raise ValidationError(
            {"client_key": ["A client certificate needs its key, and a key its certificate."]}
        )
    if token:
        member.token_encrypted = seal(token)
        member.client_certificate = member.client_key_encrypted = ""
    elif certificate:
        member.client_certificate = certificate
        member.client_key_encrypted = seal(key)
        member.token_encrypted = ""
    if not member.server:
        raise ValidationError({"server": ["The API server's URL is required."]})
    if not (member.token_encrypted or member.client_certificate):
        raise ValidationError({"token": ["Give a token or a client certificate and key."]})


def _validate(member: KubeCluster) -> None:
    labels = member.labels
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise ValidationError({"labels": ["Labels are an object of strings to strings."]})
    member.full_clean(exclude=["allowed_tenants"])


def _checked(member: KubeCluster) -> checks.Probe:
    """Check ``member``'s (unsaved) credentials, or raise :class:`CredentialsRefused`."""
    try:
        gateway = own_gateway_for(member)
        return checks.check(gateway, server=member.server)
    except checks.CheckFailed as exc:
        raise CredentialsRefused(exc.message) from exc
    except KubeError as exc:  # a kubeconfig the client cannot load: a CA that is no PEM
        raise CredentialsRefused(exc.message) from exc
    except UnsealError as exc:  # kept credentials that no configured key opens
        raise CredentialsRefused(
            f"No configured key opens the stored credentials of {member.name}: give them again."
        ) from exc


def _record(member: KubeCluster, seen: checks.Probe | None, message: str = "") -> None:
    """Put what a check saw on ``member`` (not saved)."""
    member.reachable = seen is not None
    if seen is not None:
        member.kubernetes_version = seen.kubernetes_version
        member.api_latency_ms = seen.api_latency_ms
        member.operators = seen.operators
    member.health_message = message[:500]
    member.checked_at = timezone.now()


def kube_cluster_register(
    *,
    actor: Any,
    name: str,
    server: str,
    token: str = "",
    client_certificate: str = "",
    client_key: str = "",
    ca_data: str = "",
    insecure_skip_tls_verify: bool = False,
    region: str = "",
    labels: Mapping[str, str] | None = None,
    placement_order: int = 100,
    allowed_tenants: Iterable[Tenant] = (),
) -> KubeCluster:
    """Register a Kubernetes cluster as a member of the fleet (platform admins only),
    once its credentials pass the check; its version and operators are recorded."""
    require_platform_admin(actor)
    member = KubeCluster(
        name=name, region=region, labels=dict(labels or {}), placement_order=placement_order
    )
    _sign_in(
        member,
        {
            "server": server,
            "ca_data": ca_data,
            "insecure_skip_tls_verify": insecure_skip_tls_verify,
            "token": token,
            "client_certificate": client_certificate,
            "client_key": client_key,
        },
    )
    _validate(member)
    _record(member, _checked(member))
    with transaction.atomic():
        try:
            with transaction.atomic():
                member.save()
        except IntegrityError as exc:  # registered concurrently since full_clean looked
            raise ValidationError({"name": [f"A cluster named {name!r} exists."]}) from exc
        member.allowed_tenants.set(list(allowed_tenants))
        audit_record(
            actor=actor, action="kube_cluster.register", obj=member, data=_audit_data(member)
        )
    return member


def kube_cluster_update(
    *, actor: Any, member: KubeCluster, changes: Mapping[str, Any]
) -> KubeCluster:
    """Change a member's placement (region, labels, order, allow-list) or how gangway
    signs in to it (platform admins only). New credentials are checked first, sealed and
    ``credentials_changed_at`` moved, so every process builds its gateway again."""
    require_platform_admin(actor)
    if "name" in changes and changes["name"] != member.name:
        raise ValidationError({"name": ["A cluster's name cannot be changed."]})
    unknown = sorted(set(changes) - EDITABLE - {"name"})
    if unknown:
        raise ValidationError({key: ["This field cannot be changed."] for key in unknown})
    member = KubeCluster.objects.get(pk=member.pk)
    before = _audit_data(member)
    signing_in = {k: v for k, v in changes.items() if k in CREDENTIALS}
    if signing_in and member.from_settings:
        raise ValidationError(
            {
                next(iter(signing_in)): [
                    f"{member.name} signs in with settings.KUBECONFIG: change it there."
                ]
            }
        )
    for name in PLACEMENT:
        if name in changes:
            setattr(member, name, changes[name])
    if signing_in:
        _sign_in(member, signing_in)
    _validate(member)
    if signing_in:
        _record(member, _checked(member))
        member.credentials_changed_at = timezone.now()
    with transaction.atomic():
        member.save()
        if "allowed_tenants" in changes:
            member.allowed_tenants.set(list(changes["allowed_tenants"]))
        audit_record(
            actor=actor,
            action="kube_cluster.update",
            obj=member,
            data={
                "before": before,
                "after": _audit_data(member),
                "credentials_changed": bool(signing_in),
            },
        )
    return member


SCHEDULABLE_ACTIONS = {
    Schedulable.ACTIVE: "kube_cluster.uncordon",
    Schedulable.CORDONED: "kube_cluster.cordon",
    Schedulable.DRAINING: "kube_cluster.drain",
}


@transaction.atomic
def kube_cluster_set_schedulable(
    *, actor: Any, member: KubeCluster, schedulable: str
) -> KubeCluster:
    """Cordon (no new placements), drain (:func:`kube_cluster_drain`, each kind its own
    way) or uncordon a member (platform admins only). Cordoning or uncordoning ends a
    drain: what was moved stays where it went, what runs there stays."""
    require_platform_admin(actor)
    if schedulable not in SCHEDULABLE_ACTIONS:
        raise ValidationError(
            {"schedulable": [f"{schedulable!r} is not one of {list(SCHEDULABLE_ACTIONS)}."]}
        )
    if schedulable == Schedulable.DRAINING:
        return kube_cluster_drain(actor=actor, member=member)
    member = KubeCluster.objects.select_for_update().get(pk=member.pk)
    if member.schedulable != schedulable:
        before = member.schedulable
        member.schedulable = schedulable
        member.drain_mode, member.drain_started_at, member.drained_at = "", None, None
        member.save(update_fields=["schedulable", "drain_mode", "drain_started_at", "drained_at"])
        audit_record(
            actor=actor,
            action=SCHEDULABLE_ACTIONS[Schedulable(schedulable)],
            obj=member,
            data={"before": before, "after": schedulable},
        )
    return member


@transaction.atomic
def kube_cluster_drain(
    *, actor: Any, member: KubeCluster, mode: str = DrainMode.DEFAULT
) -> KubeCluster:
    """Drain a member (platform admins only): nothing new is placed there, and what runs
    there is moved or waited for, as its kind says (``mode`` ``requeue``: every kind is
    requeued, jobs too). The engine carries it out (:mod:`clusters.engine.member_drain`),
    asked for after commit; draining again changes only the mode."""
    require_platform_admin(actor)
    if mode not in DrainMode.values:
        raise ValidationError({"mode": [f"{mode!r} is not one of {list(DrainMode.values)}."]})
    member = KubeCluster.objects.select_for_update().get(pk=member.pk)
    before = (member.schedulable, member.drain_mode)
    if before == (Schedulable.DRAINING, mode):
        return member
    if member.schedulable != Schedulable.DRAINING:
        member.drain_started_at, member.drained_at = timezone.now(), None
    member.schedulable, member.drain_mode = Schedulable.DRAINING, mode
    member.save(update_fields=["schedulable", "drain_mode", "drain_started_at", "drained_at"])
    audit_record(
        actor=actor,
        action=SCHEDULABLE_ACTIONS[Schedulable.DRAINING],
        obj=member,
        data={"before": before[0], "after": Schedulable.DRAINING, "mode": mode},
    )
    enqueue.reconcile()
    return member


@transaction.atomic
def kube_cluster_remove(*, actor: Any, member: KubeCluster) -> None:
    """Remove a member nothing is placed on (platform admins only). Requests that were
    deleted forget it; any other request placed on it, or waiting for it by name, is a
    conflict: cordon it, and let them finish or delete them first."""
    require_platform_admin(actor)
    member = KubeCluster.objects.select_for_update().get(pk=member.pk)
    placed, waiting = kube_cluster_references(member=member)
    if placed or waiting:
        raise ServiceConflict(
            f"{member.name} still has {placed} request(s) placed on it and {waiting} waiting "
            "for it by name: cordon it, and let them finish or delete them first.",
            code="kube_cluster_in_use",
        )
    rows = ClusterRequest.objects.unscoped()
    rows.filter(kube_cluster=member).update(kube_cluster=None)
    rows.filter(wanted_kube_cluster=member).update(wanted_kube_cluster=None)
    audit_record(actor=actor, action="kube_cluster.remove", obj=member, data=_audit_data(member))
    member.delete()


@transaction.atomic
def kube_cluster_rotate_keys(*, actor: Any) -> int:
    """Seal every stored secret again with the first of ``FLEET_CREDENTIAL_KEYS``
    (platform admins only), so that the older keys can then be dropped; the number of
    members whose secrets were sealed again. A secret no key opens stops it, unchanged."""
    require_platform_admin(actor)
    count = 0
    for member in KubeCluster.objects.select_for_update().order_by("name"):
        fields = [column for column in SEALED.values() if getattr(member, column)]
        if not fields:
            continue
        try:
            for column in fields:
                setattr(member, column, reseal(getattr(member, column)))
        except UnsealError as exc:
            raise ServiceConflict(
                f"No configured key opens the credentials of {member.name}: put the key "
                "they were sealed with back in FLEET_CREDENTIAL_KEYS.",
                code="unseal_failed",
            ) from exc
        member.save(update_fields=fields)
        count += 1
    audit_record(
        actor=actor,
        action="kube_cluster.rotate_keys",
        object_type="kubecluster",
        object_repr="every member's credentials",
        data={"members": count},
    )
    return count


def kube_cluster_check(*, actor: Any, member: KubeCluster) -> CheckReport:
    """Run the full credential check on a saved member now (platform admins only) and
    record what it saw as the member's health."""
    require_platform_admin(actor)
    try:
        seen = checks.check(gateway_for(member), server=member.server or "settings' cluster")
    except checks.CheckFailed as exc:
        _record(member, exc.seen, exc.message)
        report = CheckReport(passed=False, message=exc.message)
    except (KubeError, UnsealError) as exc:
        _record(member, None, str(exc))
        report = CheckReport(passed=False, message=str(exc))
    else:
        _record(member, seen)
        report = CheckReport(passed=True, message="")
    KubeCluster.objects.filter(pk=member.pk).update(**_health(member))
    return report


def _health(member: KubeCluster) -> dict[str, Any]:
    names = ("reachable", "api_latency_ms", "kubernetes_version", "operators")
    return {name: getattr(member, name) for name in (*names, "health_message", "checked_at")}
