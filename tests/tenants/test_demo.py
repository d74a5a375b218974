"""seed_demo: the demo catalogue, tenants and logins, idempotent."""

from __future__ import annotations

from io import StringIO
from typing import Any

from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command

from tenants.models import AuditEvent, GpuFlavor, Membership, Quota, Role, Tenant
from tests.tenants.conftest import row_counts


def test_seed_demo_is_idempotent_and_prints_logins(db: Any) -> None:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    first = row_counts()
    call_command("seed_demo", stdout=StringIO())
    assert row_counts() == first
    assert AuditEvent.objects.filter(action="demo.seed").count() == 1

    text = out.getvalue()
    assert "gangway-demo" in text
    for username in ("admin", "ada", "eli", "vic", "sam", "emma", "eve", "val"):
        assert f"  {username} " in text

    assert sorted(Tenant.objects.values_list("slug", "cohort")) == [
        ("speech", "research"),
        ("vision", "research"),
    ]
    h100 = GpuFlavor.objects.get(name="h100")
    assert (h100.gpu_product, h100.gpus_per_node, h100.cpu_per_node) == (
        "NVIDIA-H100-80GB-HBM3",
        8,
        192,
    )
    assert (h100.memory_per_node_gib, h100.node_count, h100.sharing) == (1800, 4, False)
    l4 = GpuFlavor.objects.get(name="l4")
    assert (l4.gpu_product, l4.gpus_per_node, l4.node_count, l4.sharing) == (
        "NVIDIA-L4",
        1,
        4,
        True,
    )
    assert Quota.objects.count() == 4
    for slug in ("vision", "speech"):
        roles = set(Membership.objects.filter(tenant__slug=slug).values_list("role", flat=True))
        assert roles == set(Role.values)
    assert get_user_model().objects.get(username="admin").is_staff
    assert authenticate(username="eli", password="gangway-demo") is not None
