"""FilterSets for the tenants app, shared by the API lists and the dashboard (STYLE 10)."""

from __future__ import annotations

import django_filters
from django.contrib.auth import get_user_model

from controlplane.api.filters import StrictBooleanFilter, UtcDateTimeFilter
from tenants.models import AuditEvent, GpuFlavor, Membership, Role, Tenant


class UserFilter(django_filters.FilterSet):
    """Users by (part of) their username and by platform-admin flag."""

    username = django_filters.CharFilter(lookup_expr="icontains")
    is_staff = StrictBooleanFilter()

    class Meta:
        model = get_user_model()
        fields = ["username", "is_staff"]


class FlavorFilter(django_filters.FilterSet):
    """Flavors by GPU product and by whether they allow fractional GPUs."""

    gpu_product = django_filters.CharFilter()
    sharing = StrictBooleanFilter()

    class Meta:
        model = GpuFlavor
        fields = ["gpu_product", "sharing"]


class TenantFilter(django_filters.FilterSet):
    """Tenants by cohort."""

    cohort = django_filters.CharFilter()

    class Meta:
        model = Tenant
        fields = ["cohort"]


class MembershipFilter(django_filters.FilterSet):
    """Members by role."""

    role = django_filters.ChoiceFilter(choices=Role.choices)

    class Meta:
        model = Membership
        fields = ["role"]


class AuditEventFilter(django_filters.FilterSet):
    """Audit events by tenant slug, action, actor's username, the object (type and id)
    and a time window; shared by ``GET /api/v1/audit/`` and the audit pages."""

    tenant = django_filters.CharFilter(field_name="tenant_slug")
    # Actions are dotted ("membership.add"): the start of one finds every action of that
    # kind ("membership"), and a whole action still finds just itself.
    action = django_filters.CharFilter(
        lookup_expr="startswith",
        help_text='An action ("membership.add") or its start ("membership": every membership '
        "action).",
    )
    actor = django_filters.CharFilter(field_name="actor_name")
    object_type = django_filters.CharFilter()
    object_id = django_filters.CharFilter()
    since = UtcDateTimeFilter(field_name="at", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = AuditEvent
        fields = ["tenant", "action", "actor", "object_type", "object_id", "since", "until"]
