"""Who may call a service's endpoint: its scoped "invoke" tokens and its public switch.

A token is created by the service's owner or a tenant admin, shown once (``gws_`` and
43 URL-safe characters), stored as its SHA-256 digest, listed by name and prefix, and
revoked by deleting its row. Only a tenant admin makes a service public. Every change
is audited in its own transaction.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from clusters.models import ClusterRequest, Service, ServiceToken
from clusters.requests import rules
from tenants.audit import audit_record
from tenants.models import Role
from tenants.selectors import role_in_tenant

TOKEN_PREFIX = "gws_"
MAX_TOKENS = 50


def token_digest(secret: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(secret.encode()).hexdigest()


def _may_manage_tokens(*, actor: Any, request: ClusterRequest, role: str | None) -> None:
    if not rules.can_manage(actor=actor, cluster=request, role=role):
        raise PermissionDenied(
            "Only the service's owner or a tenant admin may manage its invoke tokens."
        )


def service_tokens(*, request: ClusterRequest) -> QuerySet[ServiceToken]:
    """The service's invoke tokens, oldest first (never their secrets)."""
    return ServiceToken.objects.filter(service_id=request.pk).select_related("created_by")


def service_token_create(
    *, actor: Any, request: ClusterRequest, name: str, role: str | None = None
) -> tuple[ServiceToken, str]:
    """A new invoke token of the service and its secret (returned only here)."""
    _may_manage_tokens(actor=actor, request=request, role=role)
    name = name.strip()
    if not name:
        raise ValidationError({"name": ["Name the token (who will use it)."]})
    with transaction.atomic():
        details = Service.objects.select_for_update().get(pk=request.pk)
        if details.tokens.count() >= MAX_TOKENS:
            raise ValidationError(
                {"name": [f"A service has at most {MAX_TOKENS} tokens; revoke one first."]}
            )
        if details.tokens.filter(name=name).exists():
            raise ValidationError({"name": [f"{request.name} already has a token {name!r}."]})
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = ServiceToken.objects.create(
            service=details,
            name=name,
            prefix=secret[: len(TOKEN_PREFIX) + 6],
            digest=token_digest(secret),
            created_by=actor,
        )
        audit_record(
            actor=actor,
            action="service.token_created",
            obj=request,
            tenant=request.tenant,
            data={"token": name, "prefix": token.prefix},
        )
    return token, secret


def service_token_revoke(
    *, actor: Any, request: ClusterRequest, token_id: int, role: str | None = None
) -> ServiceToken:
    """Revoke one of the service's invoke tokens (``ServiceToken.DoesNotExist`` if it
    has none of that id)."""
    _may_manage_tokens(actor=actor, request=request, role=role)
    with transaction.atomic():
        token = ServiceToken.objects.select_for_update().get(pk=token_id, service_id=request.pk)
        token.delete()
        audit_record(
            actor=actor,
            action="service.token_revoked",
            obj=request,
            tenant=request.tenant,
            data={"token": token.name, "prefix": token.prefix},
        )
    return token


def service_public_set(
    *, actor: Any, request: ClusterRequest, public: bool, role: str | None = None
) -> Service:
    """Let the service's endpoint answer anyone (``public``) or token holders only."""
    role = role or role_in_tenant(user=actor, tenant=request.tenant)
    if role != Role.ADMIN:
        raise PermissionDenied("Only a tenant admin may make a service public or private.")
    with transaction.atomic():
        details = Service.objects.select_for_update().get(pk=request.pk)
        if details.public != public:
            details.public = public
            details.save(update_fields=["public"])
            audit_record(
                actor=actor,
                action="service.made_public" if public else "service.made_private",
                obj=request,
                tenant=request.tenant,
                data={"public": public},
            )
    return details


def token_used(token: ServiceToken) -> None:
    """Note a token's use, at most once a minute (a list shows when it was last used)."""
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ServiceToken.objects.filter(pk=token.pk).update(last_used_at=now)
