"""From a signed-in identity to a gangway user with the roles its groups grant.

:func:`identity_sync` is the one service every way in calls. It finds the user by issuer
and subject (never by username alone, unless ``OIDC_LINK_EXISTING_USERS``), creates it on
first sign-in, and makes the provider's memberships match the groups, each change audited
with the identity provider as the actor. Locally granted memberships stay unless the
provider now grants a role in that tenant. A bearer token's sync is skipped while the same
identity arrives with the same groups within ``OIDC_SYNC_CACHE_SECONDS``, so a stream of
API calls costs a cache read, not a transaction.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from tenants.audit import audit_record
from tenants.models import ExternalIdentity, Membership, MembershipSource, Tenant
from tenants.sso import provider, rules

ACTOR = "identity provider"
_USERNAME_UNSAFE = re.compile(r"[^\w.@+-]")


@dataclass(frozen=True)
class Identity:
    """Who the provider says signed in, and the groups it says they are in."""

    issuer: str
    subject: str
    username: str
    email: str
    name: str
    groups: tuple[str, ...]

    @classmethod
    def from_claims(cls, claims: dict[str, Any], groups: Any = None) -> Identity:
        """Read an identity from ID-token, userinfo or access-token claims; ``groups``,
        when given, is the groups claim as another source had it (a list or one string)."""
        raw_groups = claims.get(settings.OIDC_GROUPS_CLAIM) if groups is None else groups
        if isinstance(raw_groups, str):
            raw_groups = [raw_groups]
        clean = tuple(sorted({str(g).lstrip("/") for g in raw_groups or () if str(g).strip()}))
        return cls(
            issuer=str(claims.get("iss") or settings.OIDC_ISSUER),
            subject=str(claims["sub"]),
            username=str(claims.get(settings.OIDC_USERNAME_CLAIM) or claims.get("email") or ""),
            email=str(claims.get("email") or ""),
            name=str(claims.get("name") or ""),
            groups=clean,
        )

    def digest(self) -> str:
        """A fingerprint of everything a sync reads, to skip syncs that change nothing."""
        blob = json.dumps([self.username, self.email, self.name, self.groups])
        return hashlib.sha256(blob.encode()).hexdigest()


class SignInRefused(PermissionDenied):
    """The identity may not sign in (deactivated here); the message says so."""


def _cache_key(identity: Identity) -> str:
    who = hashlib.sha256(f"{identity.issuer}|{identity.subject}".encode()).hexdigest()[:32]
    return f"sso:synced:{who}"


def identity_user(identity: Identity) -> Any:
    """The user for a token's identity, synced unless it was synced with the same
    groups within ``OIDC_SYNC_CACHE_SECONDS``."""
    key = _cache_key(identity)
    cached = cache.get(key) if settings.OIDC_SYNC_CACHE_SECONDS else None
    if cached and cached[0] == identity.digest():
        user = get_user_model().objects.filter(pk=cached[1], is_active=True).first()
        if user is not None:
            return user
    user = identity_sync(identity)
    if settings.OIDC_SYNC_CACHE_SECONDS:
        cache.set(key, (identity.digest(), user.pk), settings.OIDC_SYNC_CACHE_SECONDS)
    return user


def _free_username(wanted: str, subject: str) -> str:
    base = _USERNAME_UNSAFE.sub("-", wanted)[:120] or "user"
    user_model = get_user_model()
    if not user_model.objects.filter(username__iexact=base).exists():
        return base
    suffix = hashlib.sha256(subject.encode()).hexdigest()
    for length in (6, 10, 16):
        candidate = f"{base}.{suffix[:length]}"
        if not user_model.objects.filter(username__iexact=candidate).exists():
            return candidate
    raise SignInRefused(f"No free username for {wanted!r}; ask a platform admin.")


def _user_for(identity: Identity) -> tuple[Any, ExternalIdentity]:
    """The identity's user (created or linked on first sign-in), locked for the sync."""
    link = (
        ExternalIdentity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=identity.issuer, subject=identity.subject)
        .first()
    )
    if link is not None:
        return link.user, link
    user_model = get_user_model()
    user = None
    if settings.OIDC_LINK_EXISTING_USERS and identity.username:
        user = user_model.objects.filter(username__iexact=identity.username).first()
    created = user is None
    if user is None:
        user = user_model(
            username=_free_username(identity.username or identity.subject, identity.subject),
            email=identity.email,
        )
        user.set_unusable_password()
        user.save()
    link = ExternalIdentity.objects.create(
        user=user, issuer=identity.issuer, subject=identity.subject, groups=list(identity.groups)
    )
    audit_record(
        actor=None,
        actor_name=ACTOR,
        action="user.sso_create" if created else "user.sso_link",
        obj=user,
        data={"username": user.get_username(), "issuer": identity.issuer, "email": identity.email},
    )
    return user, link


def _sync_platform_admin(user: Any, identity: Identity) -> None:
    if not settings.OIDC_PLATFORM_ADMIN_GROUPS:
        return  # platform admins are managed in gangway only
    wanted = rules.is_platform_admin(identity.groups, settings.OIDC_PLATFORM_ADMIN_GROUPS)
    if user.is_staff == wanted:
        return
    user.is_staff = wanted
    user.save(update_fields=["is_staff"])
    audit_record(
        actor=None,
        actor_name=ACTOR,
        action="user.platform_admin" if wanted else "user.platform_admin_removed",
        obj=user,
        data={"username": user.get_username(), "is_staff": wanted, "groups": identity.groups},
    )


def _sync_memberships(user: Any, identity: Identity) -> None:
    granted = rules.roles_for(identity.groups, provider.rules())
    # Tenants that do not exist are ignored (a rule may name a team not yet onboarded).
    tenants = {t.slug: t for t in Tenant.objects.filter(slug__in=granted)}
    current = {
        m.tenant.slug: m for m in Membership.objects.select_related("tenant").filter(user=user)
    }
    username = user.get_username()

    def record(action: str, membership: Membership, **data: Any) -> None:
        audit_record(
            actor=None,
            actor_name=ACTOR,
            action=action,
            obj=membership,
            tenant=membership.tenant,
            data={"username": username, "groups": identity.groups, **data},
        )

    for slug, tenant in tenants.items():
        role = granted[slug]
        membership = current.get(slug)
        if membership is None:
            if tenant.archived_at is not None:
                continue  # an archived tenant takes no new members
            try:
                with transaction.atomic():
                    membership = Membership.objects.create(
                        tenant=tenant, user=user, role=role, source=MembershipSource.PROVIDER
                    )
            except IntegrityError:  # granted concurrently by another request's sync
                continue
            record("membership.sso_add", membership, role=role)
        elif membership.source != MembershipSource.PROVIDER or membership.role != role:
            before = {"role": membership.role, "source": membership.source}
            membership.role = role
            membership.source = MembershipSource.PROVIDER
            membership.save(update_fields=["role", "source"])
            record("membership.sso_role", membership, before=before, after=role)
    for slug, membership in current.items():
        if membership.source == MembershipSource.PROVIDER and slug not in tenants:
            record("membership.sso_remove", membership, role=membership.role)
            membership.delete()


@transaction.atomic
def identity_sync(identity: Identity) -> Any:
    """Create or find the identity's user and make its provider-given roles match its
    groups; raises :class:`SignInRefused` for a user deactivated in gangway."""
    user, link = _user_for(identity)
    if not user.is_active:
        raise SignInRefused(
            f"{user.get_username()} is deactivated in gangway; ask a platform admin."
        )
    changed = []
    if identity.email and user.email != identity.email:
        user.email = identity.email
        changed.append("email")
    if changed:
        user.save(update_fields=changed)
    _sync_platform_admin(user, identity)
    _sync_memberships(user, identity)
    link.groups = list(identity.groups)
    link.last_seen_at = timezone.now()
    link.save(update_fields=["groups", "last_seen_at"])
    return user


def forget(identity: Identity) -> None:
    """Drop the cached sync of an identity (its session ended)."""
    cache.delete(_cache_key(identity))
