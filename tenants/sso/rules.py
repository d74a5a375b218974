"""The group-to-role rules: which tenant roles a set of provider groups grants.

``OIDC_ROLE_RULES`` lists rules separated by spaces, commas or new lines, each
``GROUP=ROLE`` (a pattern: ``gpu-{tenant}-admins=admin`` grants admin in the tenant whose
slug fills ``{tenant}``) or ``GROUP=TENANT:ROLE`` (``research=vision:viewer``). A user in
several matching groups gets the highest role each tenant is granted; groups that match
no rule grant nothing. Rules are pure data; which tenants exist is the caller's business.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

ROLES = ("viewer", "engineer", "admin")  # least to most powerful, as tenants.models.Role
_SLUG = r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?"
_GROUP_CHARS = re.compile(r"[^\s=,]+")


class RuleError(ValueError):
    """A rule that cannot be read; the message names the rule and says what is wrong."""


@dataclass(frozen=True)
class Rule:
    """One rule: a group (or a pattern with ``{tenant}``) and what it grants."""

    group: str
    role: str
    tenant: str = ""  # fixed tenant; empty when the pattern names it

    def match(self, group: str) -> str | None:
        """The tenant slug this rule grants ``self.role`` in for ``group``, or None."""
        if self.tenant:
            return self.tenant if group == self.group else None
        found = self._pattern().fullmatch(group)
        return found.group("tenant") if found else None

    def _pattern(self) -> re.Pattern[str]:
        return _compiled(self.group)


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    before, after = pattern.split("{tenant}", 1)
    return re.compile(re.escape(before) + f"(?P<tenant>{_SLUG})" + re.escape(after))


def parse_rules(text: str) -> tuple[Rule, ...]:
    """The rules in ``text``; raises :class:`RuleError` on the first bad one."""
    rules = []
    for raw in re.split(r"[\s,]+", text.strip()):
        if not raw:
            continue
        group, sep, grant = raw.partition("=")
        if not sep or not group or not grant:
            raise RuleError(f"{raw!r}: a rule is GROUP=ROLE or GROUP=TENANT:ROLE")
        if not _GROUP_CHARS.fullmatch(group):
            raise RuleError(f"{raw!r}: the group may not contain '=' or ','")
        tenant, _, role = grant.rpartition(":")
        if role not in ROLES:
            raise RuleError(f"{raw!r}: unknown role {role!r} (one of {', '.join(ROLES)})")
        templated = "{tenant}" in group
        if group.count("{tenant}") > 1 or (templated and tenant):
            raise RuleError(f"{raw!r}: name the tenant once, in the group or after '='")
        if not templated and not tenant:
            raise RuleError(
                f"{raw!r}: say which tenant, as GROUP=TENANT:ROLE or with {{tenant}} in GROUP"
            )
        if tenant and not re.fullmatch(_SLUG, tenant):
            raise RuleError(f"{raw!r}: {tenant!r} is not a tenant slug")
        rules.append(Rule(group=group, role=role, tenant=tenant))
    return tuple(rules)


def roles_for(groups: Iterable[str], rules: Iterable[Rule]) -> dict[str, str]:
    """Tenant slug -> the highest role that ``groups`` are granted there by ``rules``."""
    granted: dict[str, str] = {}
    rules = tuple(rules)
    for group in groups:
        for rule in rules:
            slug = rule.match(group)
            if slug is None:
                continue
            current = granted.get(slug)
            if current is None or ROLES.index(rule.role) > ROLES.index(current):
                granted[slug] = rule.role
    return granted


def is_platform_admin(groups: Iterable[str], admin_groups: Iterable[str]) -> bool:
    """Whether any of ``groups`` is one of the platform admins' groups."""
    return not set(admin_groups).isdisjoint(groups)
