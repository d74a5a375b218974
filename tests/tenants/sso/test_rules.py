"""The group-to-role rules, pure: parsing, errors that name the rule, and mapping."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenants.sso.rules import ROLES, RuleError, is_platform_admin, parse_rules, roles_for

RULES = parse_rules(
    "gpu-{tenant}-admins=admin, gpu-{tenant}-users=engineer\nresearch=vision:viewer"
)


def test_a_pattern_names_the_tenant_and_a_fixed_rule_names_it_after_the_sign() -> None:
    assert roles_for(["gpu-vision-admins"], RULES) == {"vision": "admin"}
    assert roles_for(["gpu-speech-users", "research"], RULES) == {
        "speech": "engineer",
        "vision": "viewer",
    }


def test_the_highest_role_wins_when_several_groups_name_a_tenant() -> None:
    assert roles_for(["research", "gpu-vision-users"], RULES) == {"vision": "engineer"}
    assert roles_for(["gpu-vision-admins", "research"], RULES) == {"vision": "admin"}


def test_groups_that_match_no_rule_grant_nothing() -> None:
    assert roles_for(["gpu-admins", "gpu--admins", "GPU-vision-admins", "other"], RULES) == {}
    assert roles_for([], RULES) == {}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("gpu-admins", "GROUP=ROLE"),
        ("gpu-{tenant}=owner", "unknown role 'owner'"),
        ("research=admin", "say which tenant"),
        ("gpu-{tenant}-{tenant}=admin", "name the tenant once"),
        ("gpu-{tenant}=vision:admin", "name the tenant once"),
        ("research=Vision_1:admin", "not a tenant slug"),
        ("=admin", "GROUP=ROLE"),
    ],
)
def test_a_bad_rule_is_refused_with_its_text_and_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(RuleError) as caught:
        parse_rules(f"ok-{{tenant}}=viewer {text}")
    assert words in str(caught.value)
    assert text.split()[0][:5] in str(caught.value)


def test_platform_admins_are_named_by_group() -> None:
    assert is_platform_admin(["a", "platform-admins"], ["platform-admins"])
    assert not is_platform_admin(["a"], ["platform-admins"])
    assert not is_platform_admin(["platform-admins"], [])


slugs = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)


@given(st.lists(st.tuples(slugs, st.sampled_from(ROLES)), max_size=8))
def test_every_granted_role_is_the_highest_of_the_groups_naming_its_tenant(
    grants: list[tuple[str, str]],
) -> None:
    rules = parse_rules(
        "t-{tenant}-viewer=viewer t-{tenant}-engineer=engineer t-{tenant}-admin=admin"
    )
    groups = [f"t-{slug}-{role}" for slug, role in grants]
    mapped = roles_for(groups, rules)
    assert set(mapped) == {slug for slug, _ in grants}
    for slug, role in mapped.items():
        assert ROLES.index(role) == max(ROLES.index(r) for s, r in grants if s == slug)
