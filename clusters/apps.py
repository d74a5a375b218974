"""App configuration for clusters."""

from django.apps import AppConfig

from controlplane import metrics


def _check_kubernetes() -> None:
    """Readiness: raise unless the Kubernetes API answers."""
    # Imported at the first check, not at start-up: the kubernetes client takes about half
    # a second to import, and most processes (the dashboard, manage.py) never need it.
    from clusters.kube import connection

    connection.ping()


class ClustersConfig(AppConfig):
    """Ray cluster requests, their state machine, admission and provisioning."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "clusters"

    def ready(self) -> None:
        # Imported here, once apps are loaded: gauges reads models, and health imports the
        # REST framework, which loads the token model.
        from clusters.api.gauges import refresh_cluster_gauges
        from controlplane import health

        # After the shared kit's database and broker checks, as /readyz has always listed them.
        health.register_check("kubernetes", _check_kubernetes)
        metrics.on_scrape(refresh_cluster_gauges)
