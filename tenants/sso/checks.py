"""Start-up check of the single sign-on settings that the settings module cannot read.

The group-to-role rules are parsed by ``tenants.sso.rules``, which settings may not
import (tenants sits above controlplane); a rule that cannot be read stops every
management command, and so the deployment, with a message naming it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from tenants.sso.rules import RuleError, parse_rules


@checks.register()
def role_rules_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """An error for each OIDC_ROLE_RULES problem (the first one found)."""
    try:
        parse_rules(settings.OIDC_ROLE_RULES)
    except RuleError as exc:
        return [
            checks.Error(
                f"OIDC_ROLE_RULES: {exc}",
                hint="See docs/sso.md, 'Group-to-role rules'.",
                id="gangway.E101",
            )
        ]
    return []
