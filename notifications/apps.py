"""App configuration for notifications."""

from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    """Users' and tenants' notifications of cluster events (email, signed webhooks)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "notifications"

    def ready(self) -> None:
        # Imported here: the receiver reads models, which exist only once apps are loaded.
        from django.conf import settings
        from django.core.exceptions import ImproperlyConfigured
        from django.db.models.signals import post_save

        from clusters.models import ClusterEvent
        from notifications.enqueue import coalesce_dispatch
        from notifications.public_addresses import parse_allowed_hosts
        from notifications.signals import kick_dispatcher

        try:  # a typo here would otherwise refuse the very receiver it names
            parse_allowed_hosts(settings.NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS)
        except ValueError as exc:
            raise ImproperlyConfigured(f"NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS: {exc}") from exc
        coalesce_dispatch()

        # A notable event asks for a dispatch pass as soon as it commits; the beat entry
        # is the backstop (and the only path for events written in bulk).
        post_save.connect(kick_dispatcher, sender=ClusterEvent, dispatch_uid="notifications.kick")
