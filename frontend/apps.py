"""App configuration for the dashboard."""

from django.apps import AppConfig


class FrontendConfig(AppConfig):
    """The browser dashboard."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "frontend"
