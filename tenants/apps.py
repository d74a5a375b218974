"""App configuration for tenants."""

from django.apps import AppConfig


class TenantsConfig(AppConfig):
    """Tenants, memberships, the GPU catalogue, quotas and audit events."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "tenants"
