"""The preemption notice endpoint a Ray driver polls with its run's token instead of a
user's credentials (docs/preemption.md): open to anyone, and a token that is nobody's
is a 404."""

from __future__ import annotations

# Template -> status an anonymous GET must get ("{token}" is no request's token).
PUBLIC = {"api/v1/preemption/{token}/": 404}

EXEMPT = {
    "api/v1/preemption/{token}/checkpoint/": "POST with a run's token, no user; tested "
    "in tests/clusters/api/test_preemption_endpoint.py",
}
