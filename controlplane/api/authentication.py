"""Token authentication that refuses a malformed token before it reaches a query.

knox decodes the credentials as UTF-8 and looks them up by prefix, so a header such as
``Authorization: Token <NUL>...`` (PostgreSQL refuses NUL bytes) or one that is not
UTF-8 was a 500 on every endpoint. A token is letters, digits, ``-`` and ``_``;
anything else is a 401 like any unknown token.

knox also reads every token of the user on every request, to delete the expired ones
among them: a second query on each authenticated request, growing with the user's
tokens. Here a request checks only the token it presents; the beat task
:func:`tenants.tasks.purge_expired_tokens` deletes the others once they expire (an
expired token authenticates nothing either way, and the token list hides it).

And knox's lookup (the tokens with the presented key prefix, with their users) is read
in one plain SQL statement: every API request authenticates, and compiling the ORM's
join was a tenth of a create's CPU. The loop over the candidates is knox's.
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
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.crypto import hash_token
from knox.models import AuthToken
from knox.settings import CONSTANTS, knox_settings
from knox.signals import token_expired
from rest_framework.exceptions import AuthenticationFailed

from controlplane.rows import ModelRows

_TOKEN = re.compile(rb"[A-Za-z0-9_-]{1,256}")


class TokenAuthentication(KnoxTokenAuthentication):
    """knox's token authentication, for well-formed tokens only, with its lookup in one
    plain SQL statement."""

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
    of both tables) cost more CPU than the rest of a list request's own queries: it is
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
    """Documents :class:`TokenAuthentication` in the schema exactly as knox's."""

    target_class = "controlplane.api.authentication.TokenAuthentication"
