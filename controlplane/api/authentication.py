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
"""

from __future__ import annotations

import re
from typing import Any

from django.utils import timezone
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.models import AuthToken
from knox.signals import token_expired
from rest_framework.exceptions import AuthenticationFailed

_TOKEN = re.compile(rb"[A-Za-z0-9_-]{1,256}")


class TokenAuthentication(KnoxTokenAuthentication):
    """knox's token authentication, for well-formed tokens only."""

    def authenticate_credentials(self, token: bytes) -> Any:
        if not _TOKEN.fullmatch(token):
            raise AuthenticationFailed("Invalid token.")
        return super().authenticate_credentials(token)

    def _cleanup_token(self, auth_token: AuthToken) -> bool:
        # knox's hook, called for each token whose key prefix matches: True skips it.
        if auth_token.expiry is None or auth_token.expiry >= timezone.now():
            return False
        username = auth_token.user.get_username()
        auth_token.delete()
        token_expired.send(sender=self.__class__, username=username, source="auth_token")
        return True


class TokenScheme(KnoxTokenScheme):
    """Documents :class:`TokenAuthentication` in the schema exactly as knox's."""

    target_class = "controlplane.api.authentication.TokenAuthentication"
