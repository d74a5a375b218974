"""The tenants app's rows: tenants and their members, the GPU catalogue (flavors) and
quotas, the priority classes, the audit trail and users' SSH keys.

Tenant-owned rows share :class:`TenantOwned` and its queryset (tenancy.py).
"""

from tenants.models.audit_trail import AuditEvent, AuditEventQuerySet
from tenants.models.gpu_catalogue import (
    DEFAULT_DEVICE_CLASS,
    NVIDIA_DRIVER,
    DeviceMode,
    GpuFlavor,
    Quota,
    validate_topology,
)
from tenants.models.memberships import (
    ExternalIdentity,
    Membership,
    MembershipSource,
    PasswordState,
)
from tenants.models.priority_policy import PriorityClass
from tenants.models.tenancy import (
    Cohort,
    PodSecurity,
    Role,
    Tenant,
    TenantOwned,
    TenantOwnedQuerySet,
    TenantQuerySet,
    dns_label_validator,
    namespace_validator,
    tenant_namespace,
    tenant_namespace_problem,
)

# Users' SSH keys live in their own module; imported here so the app registers them.
from tenants.ssh_keys import SshKey

__all__ = [
    "DEFAULT_DEVICE_CLASS",
    "NVIDIA_DRIVER",
    "AuditEvent",
    "AuditEventQuerySet",
    "Cohort",
    "DeviceMode",
    "ExternalIdentity",
    "GpuFlavor",
    "Membership",
    "MembershipSource",
    "PasswordState",
    "PodSecurity",
    "PriorityClass",
    "Quota",
    "Role",
    "SshKey",
    "Tenant",
    "TenantOwned",
    "TenantOwnedQuerySet",
    "TenantQuerySet",
    "dns_label_validator",
    "namespace_validator",
    "tenant_namespace",
    "tenant_namespace_problem",
    "validate_topology",
]
