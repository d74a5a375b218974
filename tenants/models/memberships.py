"""Who belongs to a tenant: memberships and their source, the user's identity at the
OpenID provider, and what gangway keeps about a password beside Django's user.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tenants.models.tenancy import Role, Tenant, TenantOwned


class MembershipSource(models.TextChoices):
    """Where a membership comes from: granted here, or mapped from the identity
    provider's groups at sign-in (tenants/sso/), which then owns it."""

    LOCAL = "local", "Granted in gangway"
    PROVIDER = "provider", "Identity provider"


class Membership(TenantOwned):
    """A user's role in one tenant. A user may belong to several tenants.

    A membership whose ``source`` is the identity provider follows the user's groups
    there and cannot be changed here (the next sign-in would undo it).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    source = models.CharField(
        max_length=16, choices=MembershipSource.choices, default=MembershipSource.LOCAL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant__slug", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "user"], name="membership_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant} as {self.role}"


class ExternalIdentity(models.Model):
    """A user's account at the OpenID provider: who signed in (issuer and subject, the
    pair OIDC guarantees stable), and the groups they had when last seen."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identities"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="identity_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class PasswordState(models.Model):
    """What gangway keeps about an account's password beside Django's user: whether it
    was set by a platform admin (a temporary password) and must be changed at the next
    sign-in. No row: nothing to enforce."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="password_state",
    )
    must_change = models.BooleanField(default=False)
    changed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"password of user {self.user_id}"
