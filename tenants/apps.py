"""App configuration for tenants."""

from django.apps import AppConfig
from django.contrib.auth.signals import user_login_failed

from controlplane import metrics


class TenantsConfig(AppConfig):
    """Tenants, memberships, the GPU catalogue, quotas and audit events."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "tenants"

    def ready(self) -> None:
        # Imported here: these modules read models, which exist only once apps are loaded.
        from tenants.gauges import refresh_tenant_gauges
        from tenants.signals import on_login_failed
        from tenants.sso import checks  # noqa: F401  (registers the OIDC_ROLE_RULES check)

        # Every failed password check, whichever view asked, is counted and audited.
        user_login_failed.connect(on_login_failed, dispatch_uid="tenants.lockout")
        metrics.on_scrape(refresh_tenant_gauges)
