"""App configuration for clusters."""

from django.apps import AppConfig


class ClustersConfig(AppConfig):
    """Ray cluster requests, their state machine, admission and provisioning."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "clusters"
