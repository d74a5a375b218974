"""Django admin registrations: a read-only view of the tenants tables for operators.

The admin site makes every registration read-only (controlplane/admin_site.py): tenants,
members, quotas and flavors change only through the services, which validate the change
and audit it; the audit trail itself can never be edited.
"""

from __future__ import annotations

from django.contrib import admin

from tenants.forms import AdminSignInForm
from tenants.models import AuditEvent, ExternalIdentity, GpuFlavor, Membership, Quota, Tenant

# The admin's sign-in says when a lockout refused it (tenants/lockout.py).
admin.site.login_form = AdminSignInForm


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


class QuotaInline(admin.TabularInline):
    model = Quota
    extra = 0


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "namespace", "cohort", "weight"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline, QuotaInline]


@admin.register(GpuFlavor)
class GpuFlavorAdmin(admin.ModelAdmin):
    list_display = ["name", "gpu_product", "gpus_per_node", "node_count", "sharing"]
    search_fields = ["name", "gpu_product"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["tenant", "user", "role", "source"]
    list_filter = ["role", "source"]
    list_select_related = ["tenant", "user"]


@admin.register(ExternalIdentity)
class ExternalIdentityAdmin(admin.ModelAdmin):
    """Who signed in through the identity provider, and the groups gangway last saw."""

    list_display = ["user", "issuer", "subject", "groups", "last_seen_at"]
    search_fields = ["user__username", "subject"]
    list_select_related = ["user"]


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["at", "actor_name", "action", "tenant_slug", "object_repr", "request_id"]
    list_filter = ["action"]
    search_fields = ["actor_name", "object_repr", "request_id"]
