"""User accounts: create them, activate or deactivate them, grant or take away the
platform admin's powers (platform admins only)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction
from knox.models import AuthToken

from controlplane.exceptions import ServiceConflict
from tenants.audit import audit_record
from tenants.services.guards import require_platform_admin


@transaction.atomic
def user_create(
    *, actor: Any, username: str, email: str, password: str, is_staff: bool = False
) -> Any:
    """Create a user account (platform admins only); the password must pass Django's
    validators and is stored hashed; the audit event never contains it."""
    require_platform_admin(actor)
    user_model = get_user_model()
    user = user_model(username=username, email=email, is_staff=is_staff)
    errors: dict[str, list[str]] = {}
    if user_model.objects.filter(username__iexact=username).exists():
        errors["username"] = ["A user with this username already exists."]
    try:
        validate_password(password, user=user)
    except ValidationError as exc:
        errors["password"] = list(exc.messages)
    if errors:
        raise ValidationError(errors)
    user.set_password(password)
    user.full_clean(exclude=["password"])
    user.save()
    audit_record(
        actor=actor,
        action="user.create",
        obj=user,
        data={"username": username, "email": email, "is_staff": is_staff},
    )
    return user


def _refuse_losing_an_admin(*, actor: Any, user: Any, self_refusal: str) -> None:
    """Refuse a change that takes ``user`` away from the platform's admins: nobody does
    it to themselves, and the last active platform admin stays."""
    if user.pk == actor.pk:
        raise ServiceConflict(self_refusal, code="self")
    others = (
        get_user_model().objects.filter(is_staff=True, is_active=True).exclude(pk=user.pk).exists()
    )
    if user.is_staff and not others:
        raise ServiceConflict(
            f"{user.get_username()} is the last active platform admin.", code="last_admin"
        )


@transaction.atomic
def user_set_active(*, actor: Any, user: Any, active: bool) -> Any:
    """Deactivate a user (they can no longer sign in, and their API tokens and sessions
    end at once) or activate them again (platform admins only). Nobody deactivates
    themselves, and the last active platform admin stays."""
    return _user_switch(
        actor=actor,
        user=user,
        field="is_active",
        on=active,
        self_refusal="You cannot deactivate yourself.",
        action="user.activate" if active else "user.deactivate",
    )


@transaction.atomic
def user_set_platform_admin(*, actor: Any, user: Any, admin: bool) -> Any:
    """Make a user a platform admin or take it away (platform admins only); the last
    active platform admin cannot be taken away, nor can you demote yourself."""
    return _user_switch(
        actor=actor,
        user=user,
        field="is_staff",
        on=admin,
        self_refusal="You cannot demote yourself; ask another admin.",
        action="user.platform_admin" if admin else "user.platform_admin_removed",
    )


def _user_switch(
    *, actor: Any, user: Any, field: str, on: bool, self_refusal: str, action: str
) -> Any:
    """Turn one of ``user``'s flags (``is_active``, ``is_staff``) on or off; turning it off
    never takes away the actor's own or the last active platform admin."""
    require_platform_admin(actor)
    user = get_user_model().objects.select_for_update().get(pk=user.pk)
    if getattr(user, field) == on:
        return user
    if not on:
        _refuse_losing_an_admin(actor=actor, user=user, self_refusal=self_refusal)
    setattr(user, field, on)
    user.save(update_fields=[field])
    data: dict[str, Any] = {"username": user.get_username()}
    if field == "is_active":
        # Sessions need no sweep: the authentication backend (a ModelBackend) refuses an
        # inactive user on every request, so their sessions end at the next one.
        data["tokens_revoked"] = 0 if on else AuthToken.objects.filter(user=user).delete()[0]
    else:
        data["is_staff"] = on
    audit_record(actor=actor, action=action, obj=user, data=data)
    return user
