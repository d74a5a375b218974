"""App configuration for the dashboard."""

from django.apps import AppConfig


class FrontendConfig(AppConfig):
    """The browser dashboard."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "frontend"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in

        from frontend.views.account import mark_session_on_sign_in

        user_logged_in.connect(mark_session_on_sign_in, dispatch_uid="password-must-change")
