"""Demo data for ``make run`` and ``manage.py seed_demo``: a catalogue, two tenants and
their members, matching the demo kubesim fleet (4 nodes of 8xH100, 4 nodes of 1xL4, and
the CPU nodes where Ray heads run) node for node.

Seeding is idempotent: rows that exist are left alone (a demo user whose password was
changed keeps it), so running it twice leaves the same rows. It writes one audit event
when it created anything, as the system actor.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db import transaction

from tenants.audit import audit_record
from tenants.models import GpuFlavor, Membership, Quota, Role, Tenant, tenant_namespace

DEMO_PASSWORD = "gangway-demo"

FLAVORS = {
    "h100": dict(
        gpu_product="NVIDIA-H100-80GB-HBM3",
        gpus_per_node=8,
        cpu_per_node=192,
        memory_per_node_gib=1800,
        node_count=4,
        sharing=False,
    ),
    "l4": dict(
        gpu_product="NVIDIA-L4",
        gpus_per_node=1,
        cpu_per_node=16,
        memory_per_node_gib=64,
        node_count=4,
        sharing=True,
    ),
}

# CPU and memory quotas admit every GPU a tenant may hold, borrowed ones included, in
# the hungriest shape (single-GPU dev clusters, each with its own head):
# 24 H100 x (24 + 2 CPU, 225 + 8 GiB) + 3 L4 x (14 + 2 CPU, 56 + 8 GiB) = 672 CPU and
# 5,784 GiB. A 3-node production cluster (572 CPU, 5,384 GiB) is well inside, so what
# the GPU quota allows is never refused for a CPU or memory quota (tests/tenants/test_demo).
TENANTS = {
    "vision": dict(name="Vision Research", cpu_quota=700, memory_quota_gib=6000),
    "speech": dict(name="Speech Research", cpu_quota=700, memory_quota_gib=6000),
}
# (tenant, flavor) -> (gpus, borrow_limit): half the H100 fleet each, borrowing allowed.
QUOTAS = {
    ("vision", "h100"): (16, 8),
    ("vision", "l4"): (2, 1),
    ("speech", "h100"): (16, 8),
    ("speech", "l4"): (2, 1),
}
MEMBERS = [
    ("ada", "vision", Role.ADMIN),
    ("eli", "vision", Role.ENGINEER),
    ("vic", "vision", Role.VIEWER),
    ("sam", "speech", Role.ADMIN),
    ("emma", "speech", Role.ENGINEER),
    ("eve", "speech", Role.ENGINEER),
    ("val", "speech", Role.VIEWER),
]
PLATFORM_ADMIN = "admin"


@dataclass(frozen=True)
class DemoLogin:
    """One demo login as printed by ``seed_demo``."""

    username: str
    tenant: str
    role: str


@dataclass(frozen=True)
class DemoResult:
    """What seeding did: the logins and how many rows it created."""

    logins: list[DemoLogin]
    created: int


@transaction.atomic
def demo_seed() -> DemoResult:
    """Create the demo catalogue, tenants, users, memberships and quotas if absent."""
    user_model = get_user_model()
    created = 0

    def user(username: str, *, staff: bool = False) -> object:
        nonlocal created
        obj, new = user_model.objects.get_or_create(
            username=username,
            defaults={
                "email": f"{username}@example.com",
                "is_staff": staff,
                "is_superuser": staff,
            },
        )
        if new:
            obj.set_password(DEMO_PASSWORD)
            obj.save(update_fields=["password"])
            created += 1
        return obj

    flavors = {}
    for name, spec in FLAVORS.items():
        flavors[name], new = GpuFlavor.objects.get_or_create(name=name, defaults=spec)
        created += new
    tenants = {}
    for slug, spec in TENANTS.items():
        tenant = Tenant.objects.filter(slug=slug).first()
        if tenant is None:
            tenant = Tenant(
                slug=slug,
                namespace=tenant_namespace(slug),
                cohort="research",
                weight=Decimal("1"),
                **spec,
            )
            tenant.full_clean()  # the namespace rules of tenant_create hold here too
            tenant.save()
            created += 1
        tenants[slug] = tenant
    for (slug, flavor), (gpus, borrow) in QUOTAS.items():
        _, new = Quota.objects.get_or_create(
            tenant=tenants[slug],
            flavor=flavors[flavor],
            defaults={"gpus": gpus, "borrow_limit": borrow},
        )
        created += new
    logins = [DemoLogin(PLATFORM_ADMIN, "*", "platform admin")]
    user(PLATFORM_ADMIN, staff=True)
    for username, slug, role in MEMBERS:
        _, new = Membership.objects.get_or_create(
            tenant=tenants[slug], user=user(username), defaults={"role": role}
        )
        created += new
        logins.append(DemoLogin(username, slug, str(role)))
    if created:
        audit_record(
            actor=None,
            action="demo.seed",
            object_type="demo",
            object_id="demo",
            object_repr="demo data",
            data={"created": created},
        )
    return DemoResult(logins=logins, created=created)
