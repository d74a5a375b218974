"""A real OpenID provider for gangway's SSO tests, run on loopback in its own process.

It is django-oauth-toolkit (DOT) in a tiny Django project of its own: it never imports
gangway's settings, keeps its own SQLite file in the data directory it is given and is
started by ``python -m tests.oidc.provider.serve`` (see serve.py; tests use the
``oidc_provider`` fixture in tests/oidc/fixtures.py). Tokens are signed with real RSA keys
and verify against the JWKS it publishes, so the relying party under test does exactly what
it would do against a production provider.
"""
