"""A dashboard session that single sign-on began, checked with the provider now and then.

At sign-in the session keeps the provider's tokens (the session store is the database,
never the cookie). At most every ``OIDC_SESSION_CHECK_SECONDS`` the middleware asks the
provider again: the access token is refreshed when it has expired, and the userinfo
endpoint says who the user is now and in which groups, which are synced like a sign-in.
A provider that refuses the refresh or the token (the user was off-boarded, or signed
out elsewhere) ends the session. A provider that cannot be reached does not: everybody
would be signed out whenever it blips; the check is tried again at the next interval.
"""

from __future__ import annotations

import enum
import logging
import time
from typing import Any

from django.conf import settings

from tenants.sso import identity, provider

logger = logging.getLogger(__name__)
SESSION_KEY = "sso"


class Check(enum.Enum):
    """What a session check concluded."""

    FRESH = "fresh"  # checked recently, nothing asked
    KEPT = "kept"  # the provider confirmed the user (roles synced) or could not be asked
    ENDED = "ended"  # the provider refused: the session must end


def session_record(token: dict[str, Any], claims: dict[str, Any]) -> dict[str, Any]:
    """What a session keeps of a sign-in: the tokens and when they were last checked."""
    return {
        "iss": str(claims.get("iss") or settings.OIDC_ISSUER),
        "sub": str(claims["sub"]),
        "id_token": token.get("id_token", ""),
        "access_token": token.get("access_token", ""),
        "refresh_token": token.get("refresh_token", ""),
        "expires_at": float(token.get("expires_at") or time.time() + 60),
        "checked_at": time.time(),
    }


def _refresh(record: dict[str, Any], meta: dict[str, Any]) -> bool | None:
    """Refresh the access token in ``record``: True done, False refused, None unreachable."""
    if not record.get("refresh_token"):
        return False
    response = provider.call(
        "POST",
        meta["token_endpoint"],
        data={"grant_type": "refresh_token", "refresh_token": record["refresh_token"]},
        auth=(settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET),
    )
    if response is None:
        return None
    if response.status_code != 200:
        return False
    try:
        token = response.json()
        access_token = token["access_token"]
    except (ValueError, KeyError, TypeError):
        return None  # not an answer we can read: try again at the next check
    record["access_token"] = access_token
    record["refresh_token"] = token.get("refresh_token") or record["refresh_token"]
    record["id_token"] = token.get("id_token") or record["id_token"]
    record["expires_at"] = time.time() + float(token.get("expires_in") or 60)
    return True


def _ask_provider(record: dict[str, Any]) -> Check:
    try:
        meta = provider.metadata()
    except provider.ProviderUnavailable:
        return Check.KEPT
    if "userinfo_endpoint" not in meta:
        return Check.KEPT
    if record["expires_at"] <= time.time() + 5:
        refreshed = _refresh(record, meta)
        if refreshed is None:
            return Check.KEPT
        if refreshed is False:
            return Check.ENDED
    info = provider.userinfo(record["access_token"])
    if info == 401 and _refresh(record, meta):
        info = provider.userinfo(record["access_token"])
    if info is None:
        return Check.KEPT
    if isinstance(info, int):
        return Check.ENDED
    if str(info.get("sub")) != record["sub"]:
        return Check.ENDED
    info.setdefault("iss", record["iss"])
    try:
        identity.identity_sync(identity.Identity.from_claims(info))
    except identity.SignInRefused:
        return Check.ENDED
    return Check.KEPT


def session_check(session: Any, *, force: bool = False) -> Check:
    """Ask the provider about the session's user if it is time to (or ``force``)."""
    record = session.get(SESSION_KEY)
    if not record:
        return Check.FRESH
    if not force and time.time() - record["checked_at"] < settings.OIDC_SESSION_CHECK_SECONDS:
        return Check.FRESH
    outcome = _ask_provider(record)
    record["checked_at"] = time.time()
    session[SESSION_KEY] = record
    if outcome is Check.ENDED:
        logger.info("single sign-on session of %s ended by the provider", record["sub"])
    return outcome
