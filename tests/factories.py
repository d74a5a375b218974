"""factory-boy factories: the one place tests build rows."""

from __future__ import annotations

import secrets
from datetime import datetime
from decimal import Decimal

import factory
from django.contrib.auth import get_user_model

from tenants.models import GpuFlavor, Membership, Quota, Role, Tenant


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("correct-horse-battery")


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"team{n}")
    name = factory.LazyAttribute(lambda t: f"Team {t.slug}")
    namespace = factory.LazyAttribute(lambda t: f"gw-{t.slug}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    tenant = factory.SubFactory(TenantFactory)
    user = factory.SubFactory(UserFactory)
    role = Role.ENGINEER


class GpuFlavorFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = GpuFlavor
        django_get_or_create = ("name",)

    name = "h100"
    gpu_product = "NVIDIA-H100-80GB-HBM3"
    gpus_per_node = 8
    cpu_per_node = 192
    memory_per_node_gib = 1800
    node_count = 4
    sharing = False


class QuotaFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Quota

    tenant = factory.SubFactory(TenantFactory)
    flavor = factory.SubFactory(GpuFlavorFactory)
    gpus = 8
    borrow_limit = 0


def usage_span(
    *,
    tenant: Tenant,
    owner: object,
    flavor: GpuFlavor,
    gpus: int | str,
    start: datetime,
    end: datetime | None,
    idle: tuple[datetime, datetime | None] | None = None,
) -> object:
    """A ledger entry as the transitions write it: a cluster row holding ``gpus`` GPUs
    of ``flavor`` from ``start`` to ``end`` (``None``: still held), and, with ``idle``,
    an idle stretch of it. Returns the cluster row (ready while it holds GPUs, else
    deleted)."""
    from clusters.domain.states import State
    from clusters.models import ClusterRequest, IdleSpan, UsageSpan

    username = owner.get_username()  # type: ignore[attr-defined]
    cluster = ClusterRequest.objects.create(
        tenant=tenant,
        owner=owner,
        name=f"{username}-{secrets.token_hex(3)}",
        flavor=flavor,
        workers=1,
        gpus=Decimal(gpus),
        # A closed span is a cluster's past: the row is gone, and holds nothing now.
        state=State.READY if end is None else State.DELETED,
    )
    common = {
        "tenant": tenant,
        "cluster": cluster,
        "username": username,
        "flavor_name": flavor.name,
        "gpus": Decimal(gpus),
    }
    UsageSpan.objects.create(**common, kind="dev", started_at=start, ended_at=end)
    if idle is not None:
        IdleSpan.objects.create(**common, started_at=idle[0], ended_at=idle[1])
    return cluster


def borrower_fills_the_fleet(borrower: Tenant, lender: Tenant, flavor: GpuFlavor) -> None:
    """A fleet of 16 ``flavor`` GPUs, 8 nominal each: ``borrower`` may borrow the lender's
    8 (so its second 8 are reclaimable), ``lender`` may not borrow. Both have room for
    many dev clusters per user."""
    for tenant in (borrower, lender):
        tenant.max_dev_clusters_per_user = tenant.max_dev_gpus_per_user = 50
        tenant.save()
    Quota.objects.filter(tenant=borrower, flavor=flavor).update(gpus=8, borrow_limit=8)
    Quota.objects.filter(tenant=lender, flavor=flavor).update(gpus=8, borrow_limit=0)
    flavor.node_count = 2
    flavor.save()
