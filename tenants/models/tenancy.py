"""Tenants and what scopes every read to them: the tenant row, its cohort, the roles
inside it, and :class:`TenantOwned`, the abstract base whose queryset's
``visible_to(user)`` is the one place that decides what a user may see (STYLE 2). Code
that must see every tenant says so with ``.unscoped()``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Self

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import ValidationError
from django.core.validators import (
    MaxValueValidator,
    MinValueValidator,
    RegexValidator,
)
from django.db import connection, models
from django.db.models import Q

from tenants.slugs import (
    KUBERNETES_DEFAULT_NAMESPACE,
    KUBERNETES_NAMESPACE_PREFIX,
    SLUG_HELP,
    SLUG_MAX_LENGTH,
    validate_tenant_slug,
)

# A cohort's name: a DNS label (RFC 1123) of at most 40 characters, as Kueue names it.
# (A tenant's slug has a rule of its own, tenants/slugs.py.)
dns_label_validator = RegexValidator(
    r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$",
    "Use 1-40 lowercase letters, digits and hyphens, starting with a letter and "
    "ending with a letter or digit.",
    code="invalid_slug",
)
namespace_validator = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
    "A namespace is a DNS label: at most 63 lowercase letters, digits and hyphens.",
    code="invalid_namespace",
)


def tenant_namespace(slug: str) -> str:
    """A tenant's namespace: the configured prefix plus its slug, never chosen by a client."""
    return f"{settings.TENANT_NAMESPACE_PREFIX}{slug}"


def tenant_namespace_problem(*, namespace: str, slug: str) -> str | None:
    """Why a new tenant may not have ``namespace``, or ``None`` when it may.

    A tenant's namespace is its own, created by gangway: never one of Kubernetes' (kube-*,
    default), never the control plane's, and always the prefix plus the slug, so that it
    cannot name an existing namespace of somebody else. (An existing namespace with the
    derived name is refused on the cluster, when its bundle is first applied.)
    """
    prefix = settings.TENANT_NAMESPACE_PREFIX
    derived = tenant_namespace(slug)
    rule = f"A tenant's namespace is always {prefix!r} plus its slug ({derived!r})."
    if namespace == KUBERNETES_DEFAULT_NAMESPACE or namespace.startswith(
        KUBERNETES_NAMESPACE_PREFIX
    ):
        return f"{namespace!r} belongs to Kubernetes itself. {rule}"
    if namespace == settings.CONTROL_PLANE_NAMESPACE:
        return f"{namespace!r} is the control plane's own namespace. {rule}"
    if namespace != derived:
        return f"{namespace!r} cannot be chosen. {rule}"
    return None


class Role(models.TextChoices):
    """A member's role inside one tenant, from most to least powerful."""

    ADMIN = "admin", "Admin"
    ENGINEER = "engineer", "Engineer"
    VIEWER = "viewer", "Viewer"

    @classmethod
    def rank(cls, role: str) -> int:
        """A number that orders roles: a role may grant only roles of equal or lower rank."""
        return {cls.VIEWER: 1, cls.ENGINEER: 2, cls.ADMIN: 3}[cls(role)]


def is_platform_admin(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Whether ``user`` is signed in as a platform admin, who sees every tenant."""
    return bool(getattr(user, "is_authenticated", False) and getattr(user, "is_staff", False))


class TenantQuerySet(models.QuerySet["Tenant"]):
    """Tenants a user may see: all for platform admins, their own for everybody else."""

    def visible_to(self, user: AbstractBaseUser | AnonymousUser) -> TenantQuerySet:
        if is_platform_admin(user):
            return self.all()
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(memberships__user=user.pk).distinct()

    def unscoped(self) -> TenantQuerySet:
        """Every tenant, for code that acts for the system (tasks, the admission pass)."""
        return self.all()

    def lock(self, pk: int) -> None:
        """Lock the tenant's row until the transaction ends, so that the writes its caps
        and quota bound are checked one at a time (a no-op on SQLite, whose
        ``IMMEDIATE`` transactions run one at a time anyway)."""
        # Plain SQL: every create takes this lock, and compiling the ORM's
        # select_for_update() query would cost more than the lock itself.
        if not connection.features.has_select_for_update:
            return
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT 1 FROM {Tenant._meta.db_table} WHERE id = %s FOR UPDATE", [pk])


class PodSecurity(models.TextChoices):
    """The Pod Security Standard a tenant's namespace enforces. ``baseline`` is the
    default; ``restricted`` is for tenants that want no pod to add a capability or
    escalate privileges (it refuses the nested-container opt-in, docs/containers.md)."""

    BASELINE = "baseline", "Baseline"
    RESTRICTED = "restricted", "Restricted"


class Tenant(models.Model):
    """A team sharing the GPU clusters: its namespace, cohort, fair-share weight and policy.

    The policy fields bound what one engineer may hold (dev clusters and dev GPUs) and how
    long a dev cluster lives by default and at most. CPU and memory quotas are the
    tenant-wide totals mirrored into the namespace's ResourceQuota.
    """

    slug = models.CharField(
        max_length=SLUG_MAX_LENGTH,
        unique=True,
        validators=[validate_tenant_slug],
        help_text=SLUG_HELP,
    )
    name = models.CharField(max_length=100)
    namespace = models.CharField(max_length=63, unique=True, validators=[namespace_validator])
    cohort = models.CharField(
        max_length=40,
        default="default",
        validators=[dns_label_validator],
        help_text="Tenants in one cohort may borrow each other's unused quota.",
    )
    weight = models.DecimalField(
        max_digits=6,
        decimal_places=2,
        default=Decimal("1.00"),
        validators=[MinValueValidator(Decimal("0.01")), MaxValueValidator(Decimal("1000"))],
        help_text="Fair-share weight: a tenant with weight 2 is entitled to twice the share.",
    )
    max_dev_clusters_per_user = models.PositiveIntegerField(
        default=2, validators=[MaxValueValidator(100)]
    )
    max_dev_gpus_per_user = models.PositiveIntegerField(
        default=2, validators=[MaxValueValidator(1024)]
    )
    dev_ttl_hours = models.PositiveIntegerField(
        default=8, validators=[MinValueValidator(1), MaxValueValidator(24 * 90)]
    )
    max_ttl_hours = models.PositiveIntegerField(
        default=72, validators=[MinValueValidator(1), MaxValueValidator(24 * 365)]
    )
    pod_security = models.CharField(
        max_length=16,
        choices=PodSecurity.choices,
        default=PodSecurity.BASELINE,
        help_text="The Pod Security Standard its namespace enforces (warn and audit are "
        "always restricted).",
    )
    cpu_quota = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(10_000_000)],
        help_text="CPU cores the tenant may request in total (0: no CPU quota).",
    )
    memory_quota_gib = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(100_000_000)],
        help_text="Memory in GiB the tenant may request in total (0: no memory quota).",
    )
    idle_suspend_minutes = models.PositiveIntegerField(
        default=60,
        validators=[MaxValueValidator(24 * 60 * 30)],
        help_text="A dev cluster idle this long is warned, then suspended (0: never).",
    )
    idle_gpu_util_percent = models.PositiveSmallIntegerField(
        "idle below GPU utilisation (%)",
        default=0,
        validators=[MaxValueValidator(100)],
        help_text="A cluster whose GPUs all stay under this utilisation (%) counts as idle "
        "even if Ray is busy, e.g. on CPU (0: Ray's activity alone decides).",
    )
    idle_suspend_prod = models.BooleanField(
        default=False,
        help_text="Apply the idle policy to production clusters too (off: dev clusters only).",
    )
    allow_pip_direct_urls = models.BooleanField(
        default=False,
        help_text="Let jobs install pip packages from https:// URLs (name @ https://...); "
        "pip options such as --index-url are refused either way.",
    )
    monthly_gpu_hour_budget = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(100_000_000)],
        help_text="GPU-hours the tenant may use per calendar month (empty: no budget). At 80% "
        "its pages show a banner; at 100% the platform's BUDGET_POLICY applies.",
    )
    archived_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a platform admin archived the tenant (it held nothing then); an "
        "archived tenant takes no new requests.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=Q(dev_ttl_hours__lte=models.F("max_ttl_hours")),
                name="tenant_dev_ttl_within_max",
            ),
            # The settings-free part of tenant_namespace_problem, for writes that skip
            # validation: never Kubernetes' own namespaces, always derived from the slug.
            models.CheckConstraint(
                condition=~Q(namespace=KUBERNETES_DEFAULT_NAMESPACE)
                & ~Q(namespace__startswith=KUBERNETES_NAMESPACE_PREFIX)
                & Q(namespace__endswith=models.F("slug")),
                name="tenant_namespace_derived_not_kubernetes",
                violation_error_message="A tenant's namespace is its prefix plus its slug, "
                "never default or kube-*.",
            ),
        ]

    def __str__(self) -> str:
        return self.slug

    def clean_fields(self, exclude: Any = None) -> None:
        # The slug never changes, so it is checked when the tenant is created: a tenant
        # created under an older rule (tenants/slugs.py) keeps working and stays editable.
        if not self._state.adding:
            exclude = {*(exclude or ()), "slug"}
        super().clean_fields(exclude=exclude)

    def clean(self) -> None:
        # Only on creation: the prefix is a setting, and a tenant created under an older
        # prefix keeps its namespace (it is immutable) when the prefix changes.
        if self._state.adding:
            problem = tenant_namespace_problem(namespace=self.namespace, slug=self.slug)
            if problem:
                raise ValidationError({"namespace": problem})


class Cohort(models.Model):
    """A cohort's place in the cohort tree (Kueue's Cohort ``spec.parentName``).

    Tenants name their cohort by ``Tenant.cohort``; a cohort without a row here, or with
    no parent, is a root. The tenants of every cohort under one root borrow each other's
    unused quota, so a platform can group teams into cohorts (an org's own) that still
    lend to the rest of the platform through a common parent. ``parent`` is a name, as in
    Kueue: a parent needs no row of its own. Cycles are refused
    (``tenants.services.cohort_set_parent``).
    """

    name = models.CharField(max_length=40, unique=True, validators=[dns_label_validator])
    parent = models.CharField(
        max_length=40,
        blank=True,
        default="",
        validators=[dns_label_validator],
        help_text="The cohort this one lends to and borrows from (empty: it is a root).",
    )
    description = models.CharField(max_length=200, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(parent=models.F("name")),
                name="cohort_not_its_own_parent",
                violation_error_message="A cohort cannot be its own parent.",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class TenantOwnedQuerySet(models.QuerySet[Any]):
    """The queryset of every tenant-owned model; ``visible_to`` is the safe default path."""

    def visible_to(self, user: AbstractBaseUser | AnonymousUser) -> Self:
        if is_platform_admin(user):
            return self.all()
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(tenant__memberships__user=user.pk)

    def for_tenant(self, tenant: Tenant) -> Self:
        return self.filter(tenant=tenant)

    def unscoped(self) -> Self:
        """Every tenant's rows, for code that acts for the system (tasks, admission)."""
        return self.all()


class TenantOwned(models.Model):
    """Abstract base of every model that belongs to exactly one tenant."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")

    objects = TenantOwnedQuerySet.as_manager()

    class Meta:
        abstract = True
