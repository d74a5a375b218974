"""Periodic housekeeping of the tenants app."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone
from knox.models import AuthToken


@shared_task(name="tenants.tasks.purge_expired_tokens")
def purge_expired_tokens() -> int:
    """Delete API tokens past their expiry (authentication reads only the token it is
    shown, so the others wait for this); returns how many."""
    deleted: int = AuthToken.objects.filter(expiry__lt=timezone.now()).delete()[0]
    return deleted
