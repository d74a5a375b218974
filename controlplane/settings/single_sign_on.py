"""Single sign-on with OpenID Connect (tenants/sso/, docs/sso.md); off unless
``OIDC_ISSUER`` is set."""

from __future__ import annotations

from csp.constants import SELF
from django.core.exceptions import ImproperlyConfigured

from controlplane.env import env_bool, env_int, env_str
from controlplane.settings.security import CONTENT_SECURITY_POLICY

# Off unless OIDC_ISSUER is set. Local accounts and API tokens keep working beside it.
OIDC_ISSUER = env_str("OIDC_ISSUER", "", allow_empty=True).rstrip("/")
SSO_ENABLED = bool(OIDC_ISSUER)
# The dashboard's client: confidential, authorization code with PKCE (S256).
OIDC_CLIENT_ID = env_str("OIDC_CLIENT_ID", "", allow_empty=True)
OIDC_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET", "", allow_empty=True)
# The command line's client: public, device authorization grant. Empty: no device flow.
OIDC_CLI_CLIENT_ID = env_str("OIDC_CLI_CLIENT_ID", "", allow_empty=True)
# What the API accepts in a bearer token's `aud` (comma-separated); the dashboard's
# client id when unset.
OIDC_AUDIENCE = [
    part.strip()
    for part in env_str("OIDC_AUDIENCE", OIDC_CLIENT_ID, allow_empty=True).split(",")
    if part.strip()
]
OIDC_SCOPES = env_str("OIDC_SCOPES", "openid profile email groups")
OIDC_CLI_SCOPES = env_str("OIDC_CLI_SCOPES", "openid profile email groups offline_access")
OIDC_USERNAME_CLAIM = env_str("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
# Group-to-role rules, e.g. "gpu-{tenant}-admins=admin gpu-{tenant}-users=engineer
# research=vision:viewer" (tenants/sso/rules.py), and the groups of platform admins.
OIDC_ROLE_RULES = env_str("OIDC_ROLE_RULES", "", allow_empty=True)
OIDC_PLATFORM_ADMIN_GROUPS = [
    group
    for group in env_str("OIDC_PLATFORM_ADMIN_GROUPS", "", allow_empty=True)
    .replace(",", " ")
    .split()
]
# Only asymmetric algorithms: a token signed with a shared secret, or with none, is refused.
OIDC_ALGORITHMS = [
    alg.strip() for alg in env_str("OIDC_ALGORITHMS", "RS256,ES256,PS256").split(",") if alg
]
if SSO_ENABLED:
    if not (OIDC_CLIENT_ID and OIDC_CLIENT_SECRET):
        raise ImproperlyConfigured("OIDC_ISSUER is set: set OIDC_CLIENT_ID and OIDC_CLIENT_SECRET")
    if not OIDC_ISSUER.startswith(("https://", "http://")):
        raise ImproperlyConfigured("OIDC_ISSUER must be an https:// URL (http:// for tests)")
    _weak = [alg for alg in OIDC_ALGORITHMS if not alg.startswith(("RS", "ES", "PS", "EdDSA"))]
    if _weak:
        raise ImproperlyConfigured(
            f"OIDC_ALGORITHMS may name only asymmetric algorithms, not {', '.join(_weak)}"
        )
OIDC_CLOCK_SKEW_SECONDS = env_int("OIDC_CLOCK_SKEW_SECONDS", 60, minimum=0)
OIDC_JWKS_CACHE_SECONDS = env_int("OIDC_JWKS_CACHE_SECONDS", 300, minimum=1)
# A token naming a key not in the cached set fetches the set again, at most this often.
OIDC_JWKS_MIN_REFRESH_SECONDS = env_int("OIDC_JWKS_MIN_REFRESH_SECONDS", 5, minimum=0)
# A bearer token's groups are applied at most this often per user (the cache is short so
# that a change at the provider takes effect at once, and writes stay rare).
OIDC_SYNC_CACHE_SECONDS = env_int("OIDC_SYNC_CACHE_SECONDS", 30, minimum=0)
# A dashboard session asks the provider again (refresh, userinfo) at most this often;
# off-boarding at the provider ends the session at the next request after that.
OIDC_SESSION_CHECK_SECONDS = env_int("OIDC_SESSION_CHECK_SECONDS", 120, minimum=0)
OIDC_TIMEOUT_SECONDS = env_int("OIDC_TIMEOUT_SECONDS", 5, minimum=1)
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")
# The password form stays on /login/ beside the single sign-on button unless this is off.
OIDC_LOCAL_LOGIN = env_bool("OIDC_LOCAL_LOGIN", True)
# A provider username that a local account already has: off, the SSO user gets a
# suffixed username; on, the local account is taken over (trust the provider first).
OIDC_LINK_EXISTING_USERS = env_bool("OIDC_LINK_EXISTING_USERS", False)
# Where the provider sends the browser back; derived from the request when unset.
OIDC_REDIRECT_URI = env_str("OIDC_REDIRECT_URI", "", allow_empty=True)
if SSO_ENABLED:
    # Signing out posts to /logout/, which redirects to the provider's end-session
    # endpoint: the browser checks that redirect against form-action.
    _issuer_origin = "/".join(OIDC_ISSUER.split("/")[:3])
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"] = [SELF, _issuer_origin]
