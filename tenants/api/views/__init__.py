"""REST views of the tenants app, one module per resource: thin adapters from HTTP to
selectors and services.

Each view resolves what it acts on through a scoped selector (so an invisible object is
a 404), checks the body's shape with an input serializer, calls one service and renders
the result with an output serializer. The access rules live in the services.
"""

from tenants.api.views.audit import AuditEventViewSet
from tenants.api.views.auth import SsoConfigView, TokenView, TokenViewSet
from tenants.api.views.cohorts import CohortViewSet
from tenants.api.views.flavors import FlavorViewSet
from tenants.api.views.members import MemberViewSet
from tenants.api.views.priority_classes import (
    PriorityClassViewSet,
    TenantPriorityClassViewSet,
)
from tenants.api.views.quotas import QuotaViewSet
from tenants.api.views.ssh_keys import SshKeyViewSet
from tenants.api.views.tenants import PolicyViewSet, TenantViewSet
from tenants.api.views.users import UserViewSet

__all__ = [
    "AuditEventViewSet",
    "CohortViewSet",
    "FlavorViewSet",
    "MemberViewSet",
    "PolicyViewSet",
    "PriorityClassViewSet",
    "QuotaViewSet",
    "SshKeyViewSet",
    "SsoConfigView",
    "TenantPriorityClassViewSet",
    "TenantViewSet",
    "TokenView",
    "TokenViewSet",
    "UserViewSet",
]
