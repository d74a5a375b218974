"""Token authentication that refuses a malformed token before it reaches a query.

knox decodes the credentials as UTF-8 and looks them up by prefix, so a header such as
``Authorization: Token <NUL>...`` (PostgreSQL refuses NUL bytes) or one that is not
UTF-8 was a 500 on every endpoint. A token is letters, digits, ``-`` and ``_``;
anything else is a 401 like any unknown token.
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

_TOKEN = re.compile(rb"[A-Za-z0-9_-]{1,256}")


class TokenAuthentication(KnoxTokenAuthentication):
    """knox's token authentication, for well-formed tokens only."""

    def authenticate_credentials(self, token: bytes) -> Any:
        if not _TOKEN.fullmatch(token):
            raise AuthenticationFailed("Invalid token.")
        return super().authenticate_credentials(token)


class TokenScheme(KnoxTokenScheme):
    """Documents :class:`TokenAuthentication` in the schema exactly as knox's."""

    target_class = "controlplane.api.authentication.TokenAuthentication"
