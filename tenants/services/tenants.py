"""Tenants: create and change them (platform admins), and the part of the policy a
tenant's own admins may change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from tenants.audit import audit_record, audit_snapshot
from tenants.models import Role, Tenant, tenant_namespace
from tenants.selectors import role_in_tenant
from tenants.services.edits import edit_and_audit
from tenants.services.guards import ensure_visible, require_platform_admin

POLICY_FIELDS = (
    "max_dev_clusters_per_user",
    "max_dev_gpus_per_user",
    "dev_ttl_hours",
    "max_ttl_hours",
    "idle_suspend_minutes",
    "idle_suspend_prod",
    "idle_gpu_util_percent",
    "monthly_gpu_hour_budget",
    "allow_pip_direct_urls",
)
TENANT_EDITABLE = frozenset(
    {
        "name",
        "cohort",
        "weight",
        "cpu_quota",
        "memory_quota_gib",
        "pod_security",
        "monthly_gpu_hour_budget",
        *POLICY_FIELDS,
    }
)
TENANT_IMMUTABLE = ("slug", "namespace")


_TENANT_SNAPSHOT = ["slug", "namespace", *sorted(TENANT_EDITABLE)]


@transaction.atomic
def tenant_create(
    *,
    actor: Any,
    slug: str,
    name: str,
    namespace: str = "",
    fields: Mapping[str, Any] | None = None,
) -> Tenant:
    """Create a tenant (platform admins only); ``fields`` may set the cohort, weight, CPU
    and memory quotas and the policy fields.

    The namespace is always the configured prefix plus the slug: ``namespace`` may be
    left out or repeat that name, and anything else (``kube-system``, ``default``, the
    control plane's namespace, any other name) is refused (``tenant_namespace_problem``).
    A derived name that is itself reserved is reported on the slug, the field at fault.
    """
    require_platform_admin(actor)
    fields = dict(fields or {})
    unknown = sorted(set(fields) - TENANT_EDITABLE)
    if unknown:
        raise ValidationError({key: ["This field cannot be set."] for key in unknown})
    tenant = Tenant(slug=slug, name=name, namespace=namespace or tenant_namespace(slug), **fields)
    try:
        _tenant_clean(tenant)
    except ValidationError as exc:
        errors = exc.message_dict
        if not namespace and "namespace" in errors:
            errors.setdefault("slug", []).extend(errors.pop("namespace"))
        raise ValidationError(errors) from exc
    try:
        with transaction.atomic():
            tenant.save()
    except IntegrityError as exc:  # created concurrently since the checks above
        raise ValidationError(
            {"slug": [f"A tenant with slug {slug!r} or namespace {tenant.namespace!r} exists."]}
        ) from exc
    audit_record(
        actor=actor,
        action="tenant.create",
        obj=tenant,
        tenant=tenant,
        data=audit_snapshot(tenant, _TENANT_SNAPSHOT),
    )
    return tenant


@transaction.atomic
def tenant_update(*, actor: Any, tenant: Tenant, changes: Mapping[str, Any]) -> Tenant:
    """Change a tenant's name, cohort, weight, CPU/memory quotas or policy (platform
    admins only). Slug and namespace are immutable: Kubernetes objects live under them."""
    require_platform_admin(actor)
    errors = {
        key: [f"The {key} cannot be changed after creation."]
        for key in TENANT_IMMUTABLE
        if key in changes and changes[key] != getattr(tenant, key)
    }
    for key in sorted(set(changes) - TENANT_EDITABLE - set(TENANT_IMMUTABLE)):
        errors[key] = ["This field cannot be changed."]
    if errors:
        raise ValidationError(errors)
    tenant = Tenant.objects.select_for_update(no_key=True).get(pk=tenant.pk)
    fields = sorted(set(changes) & TENANT_EDITABLE)
    edit_and_audit(
        actor=actor,
        obj=tenant,
        changes=changes,
        fields=fields,
        check=_tenant_clean,
        action="tenant.update",
        tenant=tenant,
    )
    ensure_visible(actor=actor, tenant=tenant)
    return tenant


# What a tenant's own admins may change: how their engineers share the tenant. The
# platform keeps the rest (quotas, weight, cohort, the maximum TTL, pod security).
TENANT_ADMIN_POLICY = frozenset(
    {
        "max_dev_clusters_per_user",
        "max_dev_gpus_per_user",
        "dev_ttl_hours",
        "idle_suspend_minutes",
        "idle_suspend_prod",
        "idle_gpu_util_percent",
        "allow_pip_direct_urls",
    }
)


@transaction.atomic
def tenant_policy_update(*, actor: Any, tenant: Tenant, changes: Mapping[str, Any]) -> Tenant:
    """A tenant admin's change to their tenant's policy, within what the platform
    allows: the per-engineer caps, the default dev TTL (at most the platform's maximum
    TTL for the tenant), the idle policy and whether jobs' pip packages may be direct
    URLs. Platform admins may change these too."""
    role = role_in_tenant(user=actor, tenant=tenant)
    if role != Role.ADMIN:
        raise PermissionDenied("Only the tenant's admins may change its policy.")
    errors = {
        key: ["Only a platform admin may change this."]
        for key in sorted(set(changes) - TENANT_ADMIN_POLICY)
    }
    if errors:
        raise ValidationError(errors)
    tenant = Tenant.objects.select_for_update(no_key=True).get(pk=tenant.pk)
    edit_and_audit(
        actor=actor,
        obj=tenant,
        changes=changes,
        fields=sorted(changes),
        check=_policy_clean,
        action="tenant.policy",
        tenant=tenant,
    )
    return tenant


def _policy_clean(tenant: Tenant) -> None:
    # A tenant admin is told the platform's maximum, which they cannot change.
    if tenant.dev_ttl_hours > tenant.max_ttl_hours:
        raise ValidationError(
            {
                "dev_ttl_hours": [
                    f"At most {tenant.max_ttl_hours} hours: the maximum TTL the platform "
                    f"allows {tenant.slug}."
                ]
            }
        )
    tenant.full_clean()


def _tenant_clean(tenant: Tenant) -> None:
    # The database constraint says the same; checking first names the field at fault.
    if tenant.dev_ttl_hours > tenant.max_ttl_hours:
        raise ValidationError(
            {"dev_ttl_hours": ["The default dev TTL cannot exceed the maximum TTL."]}
        )
    if tenant.monthly_gpu_hour_budget == 0:
        # Zero would put every request over budget; no budget is the empty value.
        raise ValidationError(
            {
                "monthly_gpu_hour_budget": [
                    "A budget is at least 1 GPU-hour; leave it empty for none."
                ]
            }
        )
    tenant.full_clean()
