"""Single sign-on switched on against the real provider of ``tests/oidc`` (its own
process on loopback, real signed tokens), with the rules these tests use:

- ``gpu-{tenant}-admins`` -> admin, ``gpu-{tenant}-engineers`` -> engineer,
  ``gpu-{tenant}-viewers`` -> viewer, ``research=acme:viewer``;
- ``platform-admins`` -> platform admin.

Caches that would hide a change between two requests are off (``OIDC_SYNC_CACHE_SECONDS``
and the key-set refresh cool-down); the test of the cache turns it back on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tenants.sso import provider, tokens

RULES = (
    "gpu-{tenant}-admins=admin gpu-{tenant}-engineers=engineer "
    "gpu-{tenant}-viewers=viewer research=acme:viewer"
)


def sso_settings(settings: Any, oidc: Any) -> None:
    """Point ``settings`` at the provider ``oidc`` with the rules above."""
    settings.OIDC_ISSUER = oidc.issuer
    settings.OIDC_CLIENT_ID = oidc.web_client_id
    settings.OIDC_CLIENT_SECRET = oidc.web_client_secret
    settings.OIDC_CLI_CLIENT_ID = oidc.cli_client_id
    settings.OIDC_AUDIENCE = ["gangway"]
    settings.OIDC_ROLE_RULES = RULES
    settings.OIDC_PLATFORM_ADMIN_GROUPS = ["platform-admins"]
    settings.OIDC_SYNC_CACHE_SECONDS = 0
    settings.OIDC_SESSION_CHECK_SECONDS = 0
    settings.OIDC_JWKS_MIN_REFRESH_SECONDS = 0
    settings.OIDC_PROVIDER_NAME = "Test IdP"
    origin = oidc.base_url
    policy = settings.CONTENT_SECURITY_POLICY
    settings.CONTENT_SECURITY_POLICY = {
        **policy,
        "DIRECTIVES": {**policy["DIRECTIVES"], "form-action": ["'self'", origin]},
    }
    provider.forget()
    tokens.forget()


@pytest.fixture
def sso(settings: Any, oidc_provider: Any) -> Iterator[Any]:
    """The provider, with single sign-on on for this test."""
    sso_settings(settings, oidc_provider)
    yield oidc_provider
    provider.forget()
    tokens.forget()
