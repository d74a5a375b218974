"""Passwords: change your own, a platform admin's temporary password or reset link, and
the end of a reset by email; the dashboard and the API both call these.

Every change passes Django's validators, is audited (never with the password) and ends
the account's other sessions. API tokens survive a change you make yourself (you knew
the old password) and are revoked when an admin sets a temporary password or a reset
link is used (whoever held the account before may hold a token too). An account that
signs in through the identity provider has no password here: each service refuses it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import PasswordResetForm
from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from knox.models import AuthToken

from tenants.audit import audit_record
from tenants.models import PasswordState
from tenants.services.guards import require_platform_admin

RESET_SUBJECT_TEMPLATE = "tenants/password_reset_subject.txt"
RESET_EMAIL_TEMPLATE = "tenants/password_reset_email.txt"


def sso_message(user: Any) -> str:
    """Why an account without a usable password cannot change or reset one here."""
    return (
        f"{user.get_username()} signs in through {settings.OIDC_PROVIDER_NAME}: change or "
        "reset the password there, at your identity provider."
    )


def must_change_password(user: Any) -> bool:
    """Whether ``user`` signed in with a temporary password and must choose their own."""
    return PasswordState.objects.filter(user_id=user.pk, must_change=True).exists()


def must_change_message(user: Any) -> str:
    """What a holder of a temporary password is told where only their own will do."""
    return (
        f"{user.get_username()} has a temporary password set by an admin: sign in on the "
        "dashboard and choose your own (Password, /account/password/) before asking for "
        "an API token."
    )


def _refuse_sso(user: Any, field: str) -> None:
    if not user.has_usable_password():
        raise ValidationError({field: [sso_message(user)]}, code="sso")


def _validated(user: Any, password: str, field: str) -> None:
    try:
        validate_password(password, user=user)
    except ValidationError as exc:
        raise ValidationError({field: list(exc.messages)}) from None


def _store(user: Any, password: str, *, must_change: bool) -> None:
    user.set_password(password)
    user.save(update_fields=["password"])
    PasswordState.objects.update_or_create(
        user=user, defaults={"must_change": must_change, "changed_at": timezone.now()}
    )


def _revoke_tokens(user: Any) -> int:
    return int(AuthToken.objects.filter(user=user).delete()[0])


@transaction.atomic
def password_change(*, user: Any, old_password: str, new_password: str) -> None:
    """``user`` changes their own password: the old one must be right, the new one pass
    the validators. Clears a temporary password's must-change flag; keeps API tokens.
    The caller keeps its own session (``update_session_auth_hash``); others end."""
    user = get_user_model().objects.select_for_update().get(pk=user.pk)
    _refuse_sso(user, "old_password")
    if not user.check_password(old_password):
        raise ValidationError(
            {"old_password": ["Your old password is not right; type it again."]}, code="wrong"
        )
    _validated(user, new_password, "new_password")
    if new_password == old_password:
        raise ValidationError(
            {"new_password": ["The new password must differ from the old one."]}, code="same"
        )
    _store(user, new_password, must_change=False)
    audit_record(actor=user, action="user.password_change", obj=user, data={"tokens_revoked": 0})


@transaction.atomic
def password_set_temporary(*, actor: Any, user: Any, password: str) -> None:
    """A platform admin sets a temporary password for ``user``, who must change it at
    the next sign-in. Their sessions end and their API tokens are revoked."""
    require_platform_admin(actor)
    _replace(
        actor=actor,
        user=user,
        password=password,
        field="temporary_password",
        must_change=True,
        action="user.password_temporary",
    )


@transaction.atomic
def password_reset_link_send(*, actor: Any, user: Any, protocol: str, domain: str) -> None:
    """A platform admin mails ``user`` a link to choose a new password (Django's reset
    link and mail, as the sign-in page's "Forgot your password?" sends). The mail goes
    after commit, through ``EMAIL_BACKEND``."""
    require_platform_admin(actor)
    _refuse_sso(user, "send_reset_link")
    if not user.email:
        raise ValidationError(
            {"send_reset_link": [f"{user.get_username()} has no email address to mail."]}
        )
    context = {
        "email": user.email,
        "domain": domain,
        "site_name": domain,
        "uid": urlsafe_base64_encode(force_bytes(user.pk)),
        "user": user,
        "token": default_token_generator.make_token(user),
        "protocol": protocol,
    }
    audit_record(
        actor=actor,
        action="user.password_reset_link",
        obj=user,
        data={"username": user.get_username(), "email": user.email},
    )
    transaction.on_commit(
        lambda: PasswordResetForm().send_mail(
            RESET_SUBJECT_TEMPLATE, RESET_EMAIL_TEMPLATE, context, None, user.email
        )
    )


@transaction.atomic
def password_reset_complete(*, user: Any, new_password: str) -> None:
    """The end of a reset by email (the link's token was checked by Django's view): the
    new password, validated; API tokens are revoked and other sessions end."""
    _replace(
        actor=user,
        user=user,
        password=new_password,
        field="new_password2",
        must_change=False,
        action="user.password_reset",
    )


def _replace(
    *, actor: Any, user: Any, password: str, field: str, must_change: bool, action: str
) -> None:
    """Set a password nobody typed the old one of: validated, the account's API tokens
    revoked (whoever held it may hold one), audited as ``action``."""
    user = get_user_model().objects.select_for_update().get(pk=user.pk)
    _refuse_sso(user, field)
    _validated(user, password, field)
    _store(user, password, must_change=must_change)
    revoked = _revoke_tokens(user)
    audit_record(
        actor=actor,
        action=action,
        obj=user,
        data={"username": user.get_username(), "tokens_revoked": revoked},
    )
