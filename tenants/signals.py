"""Receivers of Django's signals for the tenants app (connected in ``TenantsConfig``)."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth import get_user_model

from controlplane.addresses import client_address
from tenants import services
from tenants.lockout import failure_record, lockout_for

# The lockout's name, so that one logger filter shows every sign-in refusal.
logger = logging.getLogger("tenants.lockout")


def on_login_failed(
    sender: Any, credentials: dict[str, Any], request: Any = None, **_: Any
) -> None:
    """``user_login_failed`` receiver: count the failure and audit it.

    An attempt refused because a lockout was already in force was never checked: it
    is logged but neither counted nor audited, so a flood of them cannot grow the
    audit table faster than the limits allow.
    """
    if "password" not in credentials:
        return  # some other kind of credential: not a password check
    username = str(credentials.get(get_user_model().USERNAME_FIELD) or "")
    address = client_address(request) if request is not None else ""
    if lockout_for(request, username) is not None:
        logger.warning(
            "sign-in refused while locked out: username=%r address=%s", username, address
        )
        return
    started = failure_record(request, username)
    services.sign_in_failure_record(
        username=username,
        address=address,
        path=getattr(request, "path", ""),
        lockouts=started,
    )
    logger.info("sign-in failed: username=%r address=%s", username, address)
