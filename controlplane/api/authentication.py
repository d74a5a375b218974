"""Token authentication that refuses a malformed token before it reaches a query.

A token is letters, digits, ``-`` and ``_``: anything else (a NUL byte, bytes that are not
UTF-8) is a 401 like any unknown token, never a query that fails. A request checks only the
token it presents (``tenants.tasks.purge_expired_tokens`` deletes expired ones), and knox's
lookup is one plain SQL statement, because every API request authenticates. Accepted as
``Token <token>`` (the CLI) and ``Bearer <token>`` (generated clients); a bearer value shaped
like a JSON Web Token is left to :mod:`tenants.sso.authentication`, so a wrong bearer value
is the same 401 whether single sign-on is on or not.
"""

from __future__ import annotations

import binascii
import functools
import re
from hmac import compare_digest
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.crypto import hash_token
from knox.models import AuthToken
from knox.settings import CONSTANTS, knox_settings
from knox.signals import token_expired
from rest_framework.authentication import get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from controlplane.rows import ModelRows

_TOKEN = re.compile(rb"[A-Za-z0-9_-]{1,256}")
_KEYWORDS = (b"token", b"bearer")


def is_jwt_shaped(credentials: bytes) -> bool:
    """Whether a bearer credential is shaped like a JWT (a gangway token never is)."""
    return credentials.count(b".") == 2


class TokenAuthentication(KnoxTokenAuthentication):
    """knox's token authentication, for well-formed tokens only, with its lookup in one
    plain SQL statement; sent after ``Token`` or ``Bearer`` (see the module)."""

    def authenticate(self, request: Any) -> Any:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() not in _KEYWORDS:
            return None  # no credentials, or another authenticator's
        if parts[0].lower() == b"bearer" and len(parts) == 2 and is_jwt_shaped(parts[1]):
            return None  # the identity provider's token (tenants.sso.authentication)
        if len(parts) == 1:
            raise AuthenticationFailed("Invalid token header. No credentials provided.")
        if len(parts) > 2:
            raise AuthenticationFailed(
                "Invalid token header. Token string should not contain spaces."
            )
        return self.authenticate_credentials(parts[1])

    def authenticate_credentials(self, token: bytes) -> Any:
        if not _TOKEN.fullmatch(token):
            raise AuthenticationFailed("Invalid token.")
        text = token.decode()
        # knox's own loop, over the same candidates (its query, read without the ORM).
        for auth_token in _candidates(text[: CONSTANTS.TOKEN_KEY_LENGTH]):
            if self._cleanup_token(auth_token):
                continue
            try:
                digest = hash_token(text)
            except (TypeError, binascii.Error):
                raise AuthenticationFailed("Invalid token.") from None
            if compare_digest(digest, auth_token.digest):
                if knox_settings.AUTO_REFRESH and auth_token.expiry:
                    self.renew_token(auth_token)
                return self.validate_user(auth_token)
        raise AuthenticationFailed("Invalid token.")

    def _cleanup_token(self, auth_token: AuthToken) -> bool:
        # knox's hook, called for each token whose key prefix matches: True skips it.
        if auth_token.expiry is None or auth_token.expiry >= timezone.now():
            return False
        username = auth_token.user.get_username()
        auth_token.delete()
        token_expired.send(sender=self.__class__, username=username, source="auth_token")
        return True


def _candidates(key: str) -> list[AuthToken]:
    """The tokens whose key prefix is ``key``, each with its user loaded, as knox's
    ``AuthToken.objects.filter(token_key=key).select_related("user")`` reads them.

    Every API request authenticates, and compiling that query (a join over every column
    of both tables) would cost more than the rest of a list request's own queries, so it is
    one plain SQL statement, its rows built as the ORM builds them
    (:mod:`controlplane.rows`).
    """
    tokens, users = ModelRows(AuthToken, "t"), ModelRows(get_user_model(), "u")
    with connection.cursor() as cursor:
        cursor.execute(_lookup_sql(), [key])
        rows = cursor.fetchall()
    found = []
    for row in rows:
        auth_token = tokens.build(row)
        auth_token.user = users.build(row, tokens.width)
        found.append(auth_token)
    return found


@functools.cache
def _lookup_sql() -> str:
    """The lookup's SQL (built once per process)."""
    users = get_user_model()
    quote = connection.ops.quote_name
    columns = f"{ModelRows(AuthToken, 't').columns}, {ModelRows(users, 'u').columns}"
    user_id = AuthToken._meta.get_field("user").column
    key = AuthToken._meta.get_field("token_key").column
    return (
        f"SELECT {columns} FROM {quote(AuthToken._meta.db_table)} t "
        f"JOIN {quote(users._meta.db_table)} u ON u.{quote(users._meta.pk.column)} "
        f"= t.{quote(user_id)} WHERE t.{quote(key)} = %s"
    )


class TokenScheme(KnoxTokenScheme):
    """Documents :class:`TokenAuthentication` in the schema: knox's ``Token`` header, or
    the same token as an HTTP bearer token (either one authenticates)."""

    target_class = "controlplane.api.authentication.TokenAuthentication"
    name = ["knoxApiToken", "apiTokenBearer"]  # type: ignore[assignment]

    def get_security_requirement(self, auto_schema: Any) -> list[dict[str, list[Any]]]:
        return [{name: []} for name in self.name]

    def get_security_definition(self, auto_schema: Any) -> list[dict[str, Any]]:
        bearer = build_bearer_security_scheme_object("Authorization", "Bearer")
        bearer["description"] = (
            "A gangway API token (POST /api/v1/auth/token/) as 'Authorization: Bearer "
            "<token>'; the same token as 'Authorization: Token <token>' works as well."
        )
        return [super().get_security_definition(auto_schema), bearer]
