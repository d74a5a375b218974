"""Project routes outside the REST API: public ones (checked for anonymous access) and
exempt ones (with the reason they are not in the matrix)."""

from __future__ import annotations

# Template -> status an anonymous GET must get.
PUBLIC = {
    "healthz": 200,
    # Closed without METRICS_TOKEN when DEBUG is off (as under test); the token's cases
    # are in tests/controlplane/test_health.py.
    "metrics": 403,
    # The OpenAPI schema and its documentation are public on purpose (README, "The API"):
    # they describe the routes, never any tenant's data.
    "api/schema/": 200,
    "api/docs/": 200,
    "login/": 200,
    # Django's reset-by-email views: the form, "check your mail", the link (a bad one
    # says so with a 200) and "your password is set".
    "password-reset/": 200,
    "password-reset/sent/": 200,
    "password-reset/{uidb64}/{token}/": 200,
    "password-reset/done/": 200,
    # Single sign-on is off under test: the provider's way in does not exist, and the
    # API says so (tests/tenants/sso/ turns it on against a real provider).
    "api/v1/auth/sso/": 200,
    "sso/login/": 404,
    "sso/callback/": 404,
    "": 302,  # the dashboard home redirects to the login page
}

# Template or prefix (ending in "/") -> why the matrix does not cover it.
EXEMPT = {
    "readyz": "probes the broker and the Kubernetes API; tested in tests/controlplane",
    "logout/": "session logout (POST); tested in tests/frontend",
    "admin/": "Django's admin site: staff-only and read-only; tested in tests/controlplane",
}
