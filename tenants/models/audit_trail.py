"""The audit trail: who did what, when, to which object, in which tenant."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models

from tenants.models.tenancy import Role, Tenant, is_platform_admin


class AuditEventQuerySet(models.QuerySet["AuditEvent"]):
    """Audit events a user may read: everything for platform admins; their tenants' for
    tenant admins; nothing for others."""

    def visible_to(self, user: AbstractBaseUser | AnonymousUser) -> AuditEventQuerySet:
        if is_platform_admin(user):
            return self.all()
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(tenant__memberships__user=user.pk, tenant__memberships__role=Role.ADMIN)

    def unscoped(self) -> AuditEventQuerySet:
        return self.all()


class AuditEvent(models.Model):
    """Who did what, when, to which object, in which tenant, under which request id.

    Written in the same transaction as the change it records, so there is never a
    change without its audit row nor an audit row for a change that rolled back.
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    actor_name = models.CharField(max_length=150, help_text="Kept when the user is deleted.")
    action = models.CharField(max_length=64)  # indexed in Meta, without a LIKE-only twin
    tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    tenant_slug = models.CharField(max_length=40, blank=True)
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=128)
    object_repr = models.CharField(max_length=200, blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    data = models.JSONField(default=dict, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        # Filtered by exact action only (tenants/filters.py): ``db_index`` would add a
        # LIKE-only index beside the plain one, written by every audited change.
        indexes = [models.Index(fields=["action"], name="auditevent_action")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.object_repr}"
