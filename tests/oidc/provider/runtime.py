"""What the control API may change while the provider runs: the access tokens' audience and
lifetime.

Kept in a module that imports nothing of Django, because settings.py hands
``token_expires_in`` to oauthlib (through DOT's EXTRA_SERVER_KWARGS) before Django is set
up. oauthlib calls it for every token it issues, so a change made through the control API
applies to the next token without rebuilding DOT's cached oauthlib server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Runtime:
    audience: str = "gangway"
    access_token_lifetime: int = 3600


runtime = Runtime()


def token_expires_in(request: Any) -> int:
    """oauthlib's ``expires_in`` callable: the lifetime, in seconds, of the next access token."""
    return runtime.access_token_lifetime
