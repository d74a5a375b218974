"""The test-only control API of the provider: JSON in, JSON out, no authentication.

It answers only requests from loopback and is exempt from CSRF. Every call is a POST
with a JSON object body (``GET /control/keys`` excepted); errors are
``{"error": "..."}`` with status 400 or 404.

``POST /control/users``
    Create or update a user: ``{username, password?, email?, name?, groups?: [...],
    is_active?}``. Groups are created as needed and replace the user's groups when given.
    Returns the user (below).
``POST /control/users/<username>/groups``
    ``{groups: [...]}``: the user's groups become exactly these. Returns the user.
``POST /control/users/<username>/deactivate``
    ``is_active = False``: the password grant and sign-in refuse the user from now on, and
    the user's access and refresh tokens are revoked, as providers do when they disable
    an account (Keycloak ends its sessions): userinfo and refresh then refuse them. (An
    access token checked only by its signature stays valid until it expires.)
``GET /control/keys``
    ``{active_kid, inactive_kids}``.
``POST /control/keys/rotate``
    A new active RSA key; the previous ones stay in the JWKS as inactive. Returns as GET.
``POST /control/keys/forget``
    Drop the inactive keys from the JWKS. Returns as GET.
``POST /control/settings``
    ``{audience?, access_token_lifetime?}`` for the access tokens issued from now on.
    Returns the current values.
``POST /control/clients/<client_id>``
    ``{redirect_uris?: [...], post_logout_redirect_uris?: [...]}`` (each replaces the list).
``POST /control/mint``
    ``{username, client_id?, scope?, exp_offset?, nbf_offset?, iat_offset?, claims?: {...},
    header?: {...}}``: an access token signed with the active key, with claims replaced (or
    removed, with null) by ``claims``, e.g. ``{"aud": "other"}`` or ``{"iss": "http://x"}``;
    ``exp_offset`` is seconds from now (negative for an expired token). Returns
    ``{access_token, claims}``.

A user is returned as ``{sub, username, email, name, groups, is_active}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import Group, User
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_refresh_token_model,
)

from tests.oidc.provider import keys, tokens
from tests.oidc.provider.runtime import runtime
from tests.oidc.provider.validators import group_names

View = Callable[..., HttpResponse]


class ControlError(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def control_view(methods: tuple[str, ...] = ("POST",)) -> Callable[[View], View]:
    """Loopback only, CSRF-exempt, JSON body parsed into ``body``, ControlError -> JSON."""

    def wrap(view: View) -> View:
        @csrf_exempt
        def inner(request: HttpRequest, **kwargs: Any) -> HttpResponse:
            if request.META.get("REMOTE_ADDR") not in ("127.0.0.1", "::1"):
                return JsonResponse({"error": "loopback only"}, status=403)
            if request.method not in methods:
                return JsonResponse({"error": f"use {' or '.join(methods)}"}, status=405)
            try:
                body = json.loads(request.body or b"{}") if request.method == "POST" else {}
                if not isinstance(body, dict):
                    raise ControlError("the body must be a JSON object")
                return JsonResponse(view(body, **kwargs))
            except ControlError as error:
                return JsonResponse({"error": str(error)}, status=error.status)
            except json.JSONDecodeError as error:
                return JsonResponse({"error": f"bad JSON: {error}"}, status=400)

        return inner

    return wrap


def _user(username: str) -> User:
    try:
        return User.objects.get(username=username)
    except User.DoesNotExist:
        raise ControlError(f"no user {username!r}", status=404) from None


def _set_groups(user: User, names: list[str]) -> None:
    user.groups.set([Group.objects.get_or_create(name=name)[0] for name in names])


def _describe(user: User) -> dict[str, Any]:
    return {
        "sub": str(user.pk),
        "username": user.username,
        "email": user.email,
        "name": user.get_full_name(),
        "groups": group_names(user),
        "is_active": user.is_active,
    }


@control_view()
def upsert_user(body: dict[str, Any]) -> dict[str, Any]:
    username = body.get("username")
    if not username:
        raise ControlError("username is required")
    user, _ = User.objects.get_or_create(username=username)
    if "password" in body:
        user.set_password(body["password"])
    if "email" in body:
        user.email = body["email"] or ""
    if "name" in body:
        first, _, last = (body["name"] or "").partition(" ")
        user.first_name, user.last_name = first, last
    if "is_active" in body:
        user.is_active = bool(body["is_active"])
    user.save()
    if "groups" in body:
        _set_groups(user, list(body["groups"]))
    return _describe(user)


@control_view()
def set_groups(body: dict[str, Any], username: str) -> dict[str, Any]:
    user = _user(username)
    _set_groups(user, list(body.get("groups", [])))
    return _describe(user)


@control_view()
def deactivate(body: dict[str, Any], username: str) -> dict[str, Any]:
    user = _user(username)
    user.is_active = False
    user.save(update_fields=["is_active"])
    get_refresh_token_model().objects.filter(user=user).delete()
    get_access_token_model().objects.filter(user=user).delete()
    return _describe(user)


@control_view(methods=("GET",))
def show_keys(body: dict[str, Any]) -> dict[str, Any]:
    return keys.describe()


@control_view()
def rotate_keys(body: dict[str, Any]) -> dict[str, Any]:
    keys.rotate()
    return keys.describe()


@control_view()
def forget_keys(body: dict[str, Any]) -> dict[str, Any]:
    keys.forget_inactive()
    return keys.describe()


@control_view()
def change_settings(body: dict[str, Any]) -> dict[str, Any]:
    if "audience" in body:
        runtime.audience = str(body["audience"])
    if "access_token_lifetime" in body:
        runtime.access_token_lifetime = int(body["access_token_lifetime"])
    return {"audience": runtime.audience, "access_token_lifetime": runtime.access_token_lifetime}


@control_view()
def update_client(body: dict[str, Any], client_id: str) -> dict[str, Any]:
    application = get_application_model().objects.filter(client_id=client_id).first()
    if application is None:
        raise ControlError(f"no client {client_id!r}", status=404)
    if "redirect_uris" in body:
        application.redirect_uris = " ".join(body["redirect_uris"])
    if "post_logout_redirect_uris" in body:
        application.post_logout_redirect_uris = " ".join(body["post_logout_redirect_uris"])
    application.save()
    return {
        "client_id": application.client_id,
        "redirect_uris": application.redirect_uris.split(),
        "post_logout_redirect_uris": application.post_logout_redirect_uris.split(),
    }


@control_view()
def mint(body: dict[str, Any]) -> dict[str, Any]:
    user = _user(str(body.get("username", "")))
    options = {
        name: body[name]
        for name in ("client_id", "scope", "exp_offset", "nbf_offset", "iat_offset", "header")
        if name in body
    }
    token, claims = tokens.mint(user, overrides=body.get("claims"), **options)
    return {"access_token": token, "claims": claims}


urlpatterns = [
    path("users", upsert_user),
    path("users/<str:username>/groups", set_groups),
    path("users/<str:username>/deactivate", deactivate),
    path("keys", show_keys),
    path("keys/rotate", rotate_keys),
    path("keys/forget", forget_keys),
    path("settings", change_settings),
    path("clients/<str:client_id>", update_client),
    path("mint", mint),
]
