"""The preemption notice's vocabulary, shared by the engine, the manifests and the API:
the pod annotations and environment variables a Ray job reads (docs/preemption.md,
"Preemption notice and checkpoints"), and the per-request token of the endpoint a driver
polls without a user's credentials.

The token is an HMAC of the request's id under ``SECRET_KEY`` (Django's signer, salted
for this one use): unguessable, nothing to store, and the same on every apply so the
objects written stay byte-identical. Pure: no database.
"""

from __future__ import annotations

from django.conf import settings
from django.core import signing

# On every pod of a request given notice (the live pods, patched by the engine).
NOTICE_ANNOTATION = "gangway.dev/preemption-notice"  # the deadline, RFC 3339 UTC
REASON_ANNOTATION = "gangway.dev/preemption-reason"
# The downward-API volume that shows a pod its own annotations, in every Ray container.
PODINFO_VOLUME = "gangway-podinfo"
PODINFO_DIR = "/etc/gangway/podinfo"
PODINFO_FILE = "annotations"
# The environment of the Ray containers (and a job's submitter).
PREEMPTION_URL_ENV = "GANGWAY_PREEMPTION_URL"
RESUME_FROM_ENV = "GANGWAY_RESUME_FROM"
PODINFO_ENV = "GANGWAY_PODINFO_ANNOTATIONS"

_SALT = "gangway.preemption"
# ``.`` never occurs in the signature's URL-safe base64, so the token splits cleanly.
_SEP = "."


def token_for(pk: int) -> str:
    """The preemption endpoint's token of request ``pk``."""
    return signing.Signer(salt=_SALT, sep=_SEP).sign(str(pk))


def request_of_token(token: str) -> int | None:
    """The request id a token was made for, or None when it is not one of ours."""
    try:
        value = signing.Signer(salt=_SALT, sep=_SEP).unsign(token)
    except signing.BadSignature:
        return None
    return int(value) if value.isdigit() else None


def preemption_path(pk: int) -> str:
    """The endpoint's path for request ``pk`` (GET: the notice; POST ``checkpoint/``)."""
    return f"/api/v1/preemption/{token_for(pk)}/"


def preemption_url(pk: int) -> str:
    """The endpoint's address as the pods reach it (``PREEMPTION_BASE_URL``)."""
    return f"{settings.PREEMPTION_BASE_URL}{preemption_path(pk)}"
