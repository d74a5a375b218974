"""factory-boy factories: the one place tests build rows."""

from __future__ import annotations

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
