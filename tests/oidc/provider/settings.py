"""Settings of the test OpenID provider: a Django project of its own, never gangway's.

serve.py sets the environment before Django reads this module:

* ``OIDC_PROVIDER_DATA_DIR`` - where the SQLite database lives (one per provider process);
* ``OIDC_PROVIDER_ORIGIN`` - ``http://127.0.0.1:<port>``, known only once the port is bound;
  the issuer is ``<origin>/o``, set explicitly (OIDC_ISS_ENDPOINT) so it never depends on
  a request's Host header.

The signing key is made here, in memory, at start; the control API rotates it in-process
(keys.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.oidc.provider.runtime import token_expires_in

HERE = Path(__file__).resolve().parent
DATA_DIR = Path(os.environ.get("OIDC_PROVIDER_DATA_DIR", "."))
ORIGIN = os.environ.get("OIDC_PROVIDER_ORIGIN", "http://127.0.0.1:0")
ISSUER = f"{ORIGIN}/o"


def new_rsa_private_key_pem() -> str:
    """A fresh 2048-bit RSA key as PKCS#8 PEM, the form DOT's OIDC_RSA_PRIVATE_KEY takes."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


SECRET_KEY = "gangway-test-oidc-provider-not-a-secret"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
ROOT_URLCONF = "tests.oidc.provider.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [HERE / "templates"],
        "APP_DIRS": True,  # DOT's own device and logout templates
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
            ]
        },
    }
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": DATA_DIR / "provider.sqlite3",
        # The server is threaded: writers wait for each other instead of failing.
        "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
    }
}
# Every token request checks a client secret and every sign-in a password: the production
# hashers would cost ~0.3 s each, for nothing in a test.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STATIC_URL = "/static/"  # DOT's base template links its stylesheet; nothing serves it
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/accounts/me/"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {
        "django.request": {"handlers": ["stderr"], "level": "WARNING"},
        "oauth2_provider": {"handlers": ["stderr"], "level": "WARNING"},
    },
}

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_ISS_ENDPOINT": ISSUER,
    "OIDC_RSA_PRIVATE_KEY": new_rsa_private_key_pem(),
    "OIDC_RSA_PRIVATE_KEYS_INACTIVE": [],
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    # Log out without a confirmation page when the RP sends an id_token_hint of the signed-in
    # user (the OIDC spec's MUST-prompt cases still prompt: no hint, or someone else's).
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc.provider.validators.ProviderValidator",
    # oauthlib's BearerToken calls token_generator(request) for every grant that issues an
    # access token (authorization code, refresh, password, device code): they are all JWTs.
    "ACCESS_TOKEN_GENERATOR": "tests.oidc.provider.tokens.access_token_generator",
    # Without this, oauthlib would use the access-token generator for refresh tokens too;
    # refresh tokens stay opaque, as at most providers.
    "REFRESH_TOKEN_GENERATOR": "oauthlib.oauth2.rfc6749.tokens.random_token_generator",
    # A callable, read per token, so the control API can change the lifetime at run time.
    "EXTRA_SERVER_KWARGS": {"token_expires_in": token_expires_in},
    "SCOPES": {
        "openid": "OpenID Connect",
        "profile": "Your name and username",
        "email": "Your email address",
        "groups": "Your groups",
        "offline_access": "Stay signed in",
    },
    "DEFAULT_SCOPES": ["openid", "profile", "email", "groups"],
    "PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,  # S256 only, as gangway will send
    "OAUTH_DEVICE_VERIFICATION_URI": f"{ISSUER}/device/",
    "OAUTH_DEVICE_VERIFICATION_URI_COMPLETE": f"{ISSUER}/device/?user_code={{user_code}}",
    "DEVICE_FLOW_INTERVAL": 1,
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
}
