"""App configuration for the project package (health checks, metrics, base API)."""

from django.apps import AppConfig


class ControlplaneConfig(AppConfig):
    """Project-level views: health, readiness and Prometheus metrics."""

    name = "controlplane"

    def ready(self) -> None:
        # Registers the system checks (static manifest, shared cache in production).
        from controlplane import checks  # noqa: F401
