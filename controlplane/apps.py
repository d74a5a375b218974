"""App configuration for the project package (health checks, metrics, base API)."""

from django.apps import AppConfig

# Imported for its side effect: it registers the system checks (static manifest, shared
# cache in production) with Django's check framework.
from controlplane import checks  # noqa: F401


class ControlplaneConfig(AppConfig):
    """Project-level views: health, readiness and Prometheus metrics."""

    name = "controlplane"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from controlplane.dbquery import widen_parsed_query_cache
        from controlplane.dbtime import use_c_timestamp_loader

        connection_created.connect(use_c_timestamp_loader, dispatch_uid="c-timestamp-loader")
        widen_parsed_query_cache()
