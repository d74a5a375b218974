"""Demo data for ``make run`` and ``manage.py seed_demo``: a catalogue, two tenants and
their members, matching the demo kubesim fleet (4 nodes of 8xH100, 4 nodes of 1xL4, one
8xH100 node in MIG 1g.10gb slices, and the CPU nodes where Ray heads run) node for node.

Seeding is idempotent: rows that exist are left alone (a demo user whose password was
changed keeps it), so running it twice leaves the same rows. It writes one audit event
when it created anything, as the system actor.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
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
        # The demo fleet's H100 nodes stand in two racks of two (docs/topology.md).
        topology=["network.topology.kubernetes.io/rack", "kubernetes.io/hostname"],
    ),
    "l4": dict(
        gpu_product="NVIDIA-L4",
        gpus_per_node=1,
        cpu_per_node=16,
        memory_per_node_gib=64,
        node_count=4,
        sharing=True,
    ),
    # The H100 node NVIDIA's DRA driver manages, each GPU split into 7 MIG 1g.10gb
    # partitions: the flavor's "GPUs" are its 56 slices, claimed through resource.k8s.io
    # with hardware isolation (docs/dra.md), with quotas of their own.
    "h100-1g": dict(
        gpu_product="NVIDIA-H100-80GB-HBM3",
        gpus_per_node=56,
        cpu_per_node=192,
        memory_per_node_gib=1800,
        node_count=1,
        sharing=False,
        device_mode="mig",
        mig_profile="1g.10gb",
    ),
}

# CPU and memory quotas admit every GPU a tenant may hold, borrowed ones included, in
# the hungriest shape (single-GPU dev clusters, each with its own head):
# 24 H100 x (24 + 2 CPU, 225 + 8 GiB) + 4 L4 x (14 + 2 CPU, 56 + 8 GiB)
# + 21 MIG slices x (3.428 + 2 CPU, 32.142 + 8 GiB) = 802 CPU and 6,691 GiB. A 3-node
# production cluster (572 CPU, 5,384 GiB) is well inside, so what the GPU quota allows is
# never refused for a CPU or memory quota (tests/tenants/test_demo).
TENANTS = {
    "vision": dict(name="Vision Research", cpu_quota=810, memory_quota_gib=6700),
    "speech": dict(name="Speech Research", cpu_quota=810, memory_quota_gib=6700),
}
# (tenant, flavor) -> (gpus, borrow_limit): half the H100 fleet each, borrowing allowed.
# The L4 quotas reach beyond onprem's four L4s: make run's spill-over scene has speech
# hold four L4s, one on cloud, while vision's engineers still get three. A quarter of the
# 56 MIG slices each, borrowing up to 7 more: slices for dev clusters, counted apart
# from whole H100s.
QUOTAS = {
    ("vision", "h100"): (16, 8),
    ("vision", "h100-1g"): (14, 7),
    ("vision", "l4"): (3, 1),
    ("speech", "h100"): (16, 8),
    ("speech", "h100-1g"): (14, 7),
    ("speech", "l4"): (4, 0),
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


def _user(username: str, *, staff: bool = False) -> tuple[AbstractBaseUser, int]:
    """The demo user, created with the demo password if absent; and 1 if it was created."""
    user, new = get_user_model().objects.get_or_create(
        username=username,
        defaults={"email": f"{username}@example.com", "is_staff": staff, "is_superuser": staff},
    )
    if new:
        user.set_password(DEMO_PASSWORD)
        user.save(update_fields=["password"])
    return user, int(new)


def _flavors() -> tuple[dict[str, GpuFlavor], int]:
    """The demo catalogue by name, and how many flavors were created."""
    flavors: dict[str, GpuFlavor] = {}
    created = 0
    for name, spec in FLAVORS.items():
        flavors[name], new = GpuFlavor.objects.get_or_create(name=name, defaults=spec)
        created += new
    return flavors, created


def _tenants() -> tuple[dict[str, Tenant], int]:
    """The demo tenants by slug, and how many were created."""
    tenants: dict[str, Tenant] = {}
    created = 0
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
    return tenants, created


def _quotas(tenants: dict[str, Tenant], flavors: dict[str, GpuFlavor]) -> int:
    """Give the demo tenants their quotas; how many quota lines were created."""
    created = 0
    for (slug, flavor), (gpus, borrow) in QUOTAS.items():
        _, new = Quota.objects.get_or_create(
            tenant=tenants[slug],
            flavor=flavors[flavor],
            defaults={"gpus": gpus, "borrow_limit": borrow},
        )
        created += new
    return created


def _logins(tenants: dict[str, Tenant]) -> tuple[list[DemoLogin], int]:
    """The platform admin and the members with their roles; how many users and
    memberships were created."""
    logins = [DemoLogin(PLATFORM_ADMIN, "*", "platform admin")]
    _, created = _user(PLATFORM_ADMIN, staff=True)
    for username, slug, role in MEMBERS:
        user, new_user = _user(username)
        _, new = Membership.objects.get_or_create(
            tenant=tenants[slug], user=user, defaults={"role": role}
        )
        created += new_user + new
        logins.append(DemoLogin(username, slug, str(role)))
    return logins, created


@transaction.atomic
def demo_seed() -> DemoResult:
    """Create the demo catalogue, tenants, users, memberships and quotas if absent."""
    flavors, new_flavors = _flavors()
    tenants, new_tenants = _tenants()
    new_quotas = _quotas(tenants, flavors)
    logins, new_logins = _logins(tenants)
    created = new_flavors + new_tenants + new_quotas + new_logins
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
