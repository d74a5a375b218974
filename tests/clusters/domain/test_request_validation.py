"""Request validation: the rules of both kinds, refused with a message on the right field."""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from clusters.domain import request_validation, shapes

TENANT = SimpleNamespace(dev_ttl_hours=8, max_ttl_hours=72)
H100 = shapes.FlavorSpec("h100", "NVIDIA-H100-80GB-HBM3", 8, 192, 1800, False, node_count=4)
L4 = shapes.FlavorSpec("l4", "NVIDIA-L4", 1, 16, 64, True, node_count=4)
ALLOW = ["rayproject/ray:2.49.2-py311-gpu"]


def check(**overrides: Any) -> None:
    args: dict[str, Any] = {
        "tenant": TENANT,
        "flavor": H100,
        "kind": "dev",
        "workers": 1,
        "min_workers": None,
        "max_workers": None,
        "gpu_fraction": None,
        "ttl_hours": None,
        "name": "bob-dev",
        "image": None,
        "kai_enabled": False,
        "image_allowlist": ALLOW,
    }
    args.update(overrides)
    request_validation.validate_request(**args)


def refused(**overrides: Any) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as info:
        check(**overrides)
    return info.value.message_dict


def test_good_requests_pass() -> None:
    check()
    check(workers=16, flavor=shapes.FlavorSpec("h100", "P", 8, 192, 1800, False))
    check(kind="prod", workers=2, min_workers=1, max_workers=4)
    check(kind="prod", workers=4)
    check(flavor=L4, gpu_fraction=Decimal("0.5"), kai_enabled=True)
    check(ttl_hours=72, image=ALLOW[0])


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"workers": 0}, "workers", "1 to 16"),
        ({"workers": 17}, "workers", "1 to 16"),
        # 12 single-GPU workers on a fleet of 4 one-GPU nodes: more GPUs than exist.
        ({"flavor": L4, "workers": 12}, "workers", "never fit"),
        ({"min_workers": 1}, "min_workers", "production"),
        (
            {"kind": "prod", "workers": 3, "min_workers": 5, "max_workers": 2},
            "min_workers",
            "above",
        ),
        ({"kind": "prod", "workers": 3, "min_workers": 4}, "min_workers", "above"),
        ({"kind": "prod", "workers": 5}, "workers", "only 4"),
        ({"kind": "prod", "workers": 2, "max_workers": 9}, "max_workers", "never fit"),
        ({"kind": "prod", "workers": 0}, "workers", "at least one"),
        ({"gpu_fraction": Decimal("0.5"), "kai_enabled": True}, "gpu_fraction", "sharing"),
        ({"flavor": L4, "gpu_fraction": Decimal("0.5")}, "gpu_fraction", "KAI"),
        (
            {"flavor": L4, "kind": "prod", "gpu_fraction": Decimal("0.5"), "kai_enabled": True},
            "gpu_fraction",
            "dev clusters only",
        ),
        ({"flavor": L4, "gpu_fraction": Decimal("1"), "kai_enabled": True}, "gpu_fraction", "0"),
        ({"ttl_hours": 73}, "ttl_hours", "72"),
        ({"image": "evil/miner:latest"}, "image", "not allowed"),
        ({"name": "Bob"}, "name", "lowercase"),
        ({"name": "9lives"}, "name", "starting with a letter"),
        ({"name": "x" * 54}, "name", "53"),
        ({"name": "a_b"}, "name", "lowercase"),
        ({"kind": "huge"}, "kind", "dev"),
    ],
)
def test_bad_requests_are_refused_with_a_message(
    overrides: dict[str, Any], field: str, words: str
) -> None:
    errors = refused(**overrides)
    assert field in errors, errors
    assert words in errors[field][0]


def test_all_errors_at_once() -> None:
    errors = refused(name="Bad", workers=99, ttl_hours=999)
    assert set(errors) == {"name", "workers", "ttl_hours"}


def test_kueue_admits_fixed_sizes_only() -> None:
    message = refused(kind="prod", workers=1, max_workers=4, kueue=True)["max_workers"][0]
    assert "Kueue" in message
    assert "Kueue" in refused(kind="prod", workers=2, min_workers=1, kueue=True)["min_workers"][0]
    check(kind="prod", workers=2, kueue=True)
    check(kind="prod", workers=2, min_workers=2, max_workers=2, kueue=True)
    check(kind="prod", workers=1, max_workers=4)
