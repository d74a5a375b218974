"""Writes of the tenants app, one module per thing written (STYLE 4, 5).

Every service is keyword-only, runs in one transaction and records its audit event in
it. Invalid input raises Django's ``ValidationError`` with a field dict, a forbidden
action ``PermissionDenied`` and a clash with current state
:class:`~controlplane.exceptions.ServiceConflict`; the API's error handler turns each
into the one error format. Callers import the services from here.
"""

from tenants.services.cohorts import cohort_delete, cohort_set
from tenants.services.flavors import FLAVOR_EDITABLE, flavor_create, flavor_delete, flavor_update
from tenants.services.members import (
    MANAGE_MEMBERS_ROLE,
    membership_add,
    membership_remove,
    membership_set_role,
)
from tenants.services.priority_classes import (
    PRIORITY_CLASS_EDITABLE,
    PRIORITY_CLASS_FACTS,
    priority_class_create,
    priority_class_delete,
    priority_class_update,
)
from tenants.services.quotas import QuotaLine, quota_set
from tenants.services.sign_ins import sign_in_failure_record
from tenants.services.ssh_keys import ssh_key_add, ssh_key_remove
from tenants.services.tenants import (
    POLICY_FIELDS,
    TENANT_ADMIN_POLICY,
    TENANT_EDITABLE,
    TENANT_IMMUTABLE,
    tenant_create,
    tenant_policy_update,
    tenant_update,
)
from tenants.services.tokens import token_issue, token_revoke, token_revoke_all
from tenants.services.users import user_create, user_set_active, user_set_platform_admin

__all__ = [
    "FLAVOR_EDITABLE",
    "MANAGE_MEMBERS_ROLE",
    "POLICY_FIELDS",
    "PRIORITY_CLASS_EDITABLE",
    "PRIORITY_CLASS_FACTS",
    "TENANT_ADMIN_POLICY",
    "TENANT_EDITABLE",
    "TENANT_IMMUTABLE",
    "QuotaLine",
    "cohort_delete",
    "cohort_set",
    "flavor_create",
    "flavor_delete",
    "flavor_update",
    "membership_add",
    "membership_remove",
    "membership_set_role",
    "priority_class_create",
    "priority_class_delete",
    "priority_class_update",
    "quota_set",
    "sign_in_failure_record",
    "ssh_key_add",
    "ssh_key_remove",
    "tenant_create",
    "tenant_policy_update",
    "tenant_update",
    "token_issue",
    "token_revoke",
    "token_revoke_all",
    "user_create",
    "user_set_active",
    "user_set_platform_admin",
]
