"""Tenants, their members and roles, the GPU catalogue, quotas and the audit trail."""
