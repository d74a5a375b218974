"""Periodic housekeeping of the tenants app."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone
from knox.models import AuthToken


@shared_task(name="tenants.tasks.purge_expired_tokens")
def purge_expired_tokens() -> int:
    """Delete API tokens past their expiry; returns how many.

    Authentication checks only the token a request presents
    (:class:`controlplane.api.authentication.TokenAuthentication`), so the user's other
    expired tokens wait here; they authenticate nothing meanwhile.
    """
    deleted: int = AuthToken.objects.filter(expiry__lt=timezone.now()).delete()[0]
    return deleted
