"""Tenants, memberships, the GPU catalogue (flavors), quotas and the audit trail.

Tenant-owned rows share :class:`TenantOwned` and its queryset, whose
``visible_to(user)`` is the one place that decides what a user may see (STYLE 2).
Code that must see every tenant (Celery tasks, the admission pass) says so with
``.unscoped()``.
"""

from __future__ import annotations

import re
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
gpu_product_validator = RegexValidator(
    r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$",
    "A node label value: at most 63 letters, digits, '-', '_' or '.'.",
    code="invalid_label_value",
)


# A MIG profile as NVIDIA names it: compute slices, then memory (``1g.10gb``, ``3g.40gb``).
mig_profile_validator = RegexValidator(
    r"^[1-7]g\.[1-9][0-9]{0,2}gb$",
    "A MIG profile such as 1g.10gb: compute slices (1-7), 'g.', then memory in GB and 'gb'.",
    code="invalid_mig_profile",
)
# A DeviceClass's name: a DNS subdomain (the driver's classes are gpu.nvidia.com, mig.nvidia.com).
device_class_validator = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    "A DeviceClass name: lowercase letters, digits, '-' and '.', such as gpu.nvidia.com.",
    code="invalid_device_class",
)


# A node label key (a DNS subdomain prefix and "/", then a name), as a topology level names it.
LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
MOST_TOPOLOGY_LEVELS = 8


def validate_topology(levels: Any) -> None:
    """A flavor's topology: distinct node label keys, coarse to fine (docs/topology.md)."""
    if not isinstance(levels, list) or not all(isinstance(k, str) for k in levels):
        raise ValidationError("A list of node label keys, coarse to fine.", code="invalid_topology")
    if len(levels) > MOST_TOPOLOGY_LEVELS:
        raise ValidationError(f"At most {MOST_TOPOLOGY_LEVELS} levels.", code="invalid_topology")
    bad = [k for k in levels if len(k) > 316 or not LABEL_KEY.match(k)]
    if bad:
        raise ValidationError(
            f"{bad[0]!r} is not a node label key (e.g. network.topology.kubernetes.io/rack).",
            code="invalid_topology",
        )
    if len(set(levels)) != len(levels):
        raise ValidationError("Each level once.", code="invalid_topology")


class DeviceMode(models.TextChoices):
    """How a flavor's GPUs are requested from Kubernetes (docs/dra.md says when to pick which)."""

    EXTENDED = "extended", "Extended resource (nvidia.com/gpu)"
    DRA = "dra", "DRA: a device class (resource.k8s.io)"
    MIG = "mig", "DRA: a MIG partition (mig.nvidia.com)"


# The DeviceClasses NVIDIA's DRA driver installs, by mode.
DEFAULT_DEVICE_CLASS = {DeviceMode.DRA: "gpu.nvidia.com", DeviceMode.MIG: "mig.nvidia.com"}
# NVIDIA's DRA driver's attribute domain (device.attributes["gpu.nvidia.com"].profile).
NVIDIA_DRIVER = "gpu.nvidia.com"


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


def _is_platform_admin(user: AbstractBaseUser | AnonymousUser) -> bool:
    return bool(getattr(user, "is_authenticated", False) and getattr(user, "is_staff", False))


class TenantQuerySet(models.QuerySet["Tenant"]):
    """Tenants a user may see: all for platform admins, their own for everybody else."""

    def visible_to(self, user: AbstractBaseUser | AnonymousUser) -> TenantQuerySet:
        if _is_platform_admin(user):
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
        if _is_platform_admin(user):
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


class MembershipSource(models.TextChoices):
    """Where a membership comes from: granted here, or mapped from the identity
    provider's groups at sign-in (tenants/sso/), which then owns it."""

    LOCAL = "local", "Granted in gangway"
    PROVIDER = "provider", "Identity provider"


class Membership(TenantOwned):
    """A user's role in one tenant. A user may belong to several tenants.

    A membership whose ``source`` is the identity provider follows the user's groups
    there and cannot be changed here (the next sign-in would undo it).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    source = models.CharField(
        max_length=16, choices=MembershipSource.choices, default=MembershipSource.LOCAL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant__slug", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "user"], name="membership_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant} as {self.role}"


class ExternalIdentity(models.Model):
    """A user's account at the OpenID provider: who signed in (issuer and subject, the
    pair OIDC guarantees stable), and the groups they had when last seen."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identities"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="identity_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class PasswordState(models.Model):
    """What gangway keeps about an account's password beside Django's user: whether it
    was set by a platform admin (a temporary password) and must be changed at the next
    sign-in. No row: nothing to enforce."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="password_state",
    )
    must_change = models.BooleanField(default=False)
    changed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"password of user {self.user_id}"


class PriorityClass(models.Model):
    """A platform-defined priority class (docs/preemption.md): requests of a higher
    ``value`` go first, whatever their tenant's share; a class that ``may_preempt`` may
    take a running request of a lower class off its GPUs, after notice.

    Protection of what runs in it: none of its running requests is preempted before it
    has run ``min_run_seconds``, nor within ``checkpoint_grace_seconds`` of its last
    reported checkpoint; a preempted one gets ``notice_seconds`` between the notice and
    being stopped (``None``: the ``RECLAIM_GRACE_SECONDS`` setting). ``tenants``: who
    may pick it (none named: every tenant). One class is the default (``is_default``),
    the class of a request that names none. Its ``name`` is also the name of the Kueue
    WorkloadPriorityClass and the Kubernetes PriorityClass written to match.
    """

    name = models.CharField(max_length=40, unique=True, validators=[dns_label_validator])
    value = models.IntegerField(
        unique=True,
        validators=[MinValueValidator(-1_000_000), MaxValueValidator(1_000_000)],
        help_text="Higher goes first; between -1,000,000 and 1,000,000.",
    )
    description = models.CharField(max_length=200, blank=True, default="")
    may_preempt = models.BooleanField(
        default=False,
        help_text="Its waiting requests may preempt running requests of lower classes.",
    )
    min_run_seconds = models.PositiveIntegerField(
        default=0, help_text="A running request of this class is not preempted before this."
    )
    checkpoint_grace_seconds = models.PositiveIntegerField(
        default=0,
        help_text="Nor within this long after it last reported a checkpoint.",
    )
    notice_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(86_400)],
        help_text="Between the preemption notice and the stop: time to save a checkpoint "
        "(empty: the platform's RECLAIM_GRACE_SECONDS).",
    )
    is_default = models.BooleanField(default=False)
    tenants = models.ManyToManyField(
        "tenants.Tenant",
        blank=True,
        related_name="priority_classes",
        help_text="The tenants that may pick it (none: every tenant).",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-value"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"],
                condition=Q(is_default=True),
                name="one_default_priority_class",
                violation_error_message="Only one priority class can be the default.",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class GpuFlavor(models.Model):
    """One kind of GPU node in the catalogue.

    ``gpu_product`` is the value of the ``nvidia.com/gpu.product`` node label that pods
    select on; the per-node figures are allocatable resources, so that a production
    worker can take a whole node; ``sharing`` says whether fractional (KAI) dev GPUs are
    allowed on it. ``max_node_count`` above ``node_count`` says that the node group can
    grow (a cluster autoscaler adds nodes up to it when asked through a
    ProvisioningRequest).
    """

    name = models.CharField(max_length=40, unique=True, validators=[dns_label_validator])
    gpu_product = models.CharField(max_length=63, validators=[gpu_product_validator])
    gpus_per_node = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(64)]
    )
    cpu_per_node = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(4096)]
    )
    memory_per_node_gib = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(65536)]
    )
    node_count = models.PositiveIntegerField(default=0, validators=[MaxValueValidator(100_000)])
    max_node_count = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(100_000)],
        help_text="The most nodes the node group can grow to (a cluster autoscaler's "
        "maximum); empty or equal to node_count: it cannot grow.",
    )
    sharing = models.BooleanField(default=False)
    # How the GPUs are requested: the extended resource, or a DRA claim on a device class
    # (with an optional CEL selector over device attributes), or a MIG partition of one
    # profile. A MIG flavor's "GPUs" are its partitions: gpus_per_node counts them, and
    # quota, admission and capacity count them apart from whole GPUs.
    device_mode = models.CharField(
        max_length=10, choices=DeviceMode.choices, default=DeviceMode.EXTENDED
    )
    device_class = models.CharField(
        max_length=253,
        blank=True,
        default="",
        validators=[device_class_validator],
        help_text="The DRA DeviceClass (empty: gpu.nvidia.com, or mig.nvidia.com for MIG).",
    )
    device_selector = models.TextField(
        max_length=2000,
        blank=True,
        default="",
        help_text="A CEL expression over device attributes the claimed devices must match, "
        'e.g. device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3".',
    )
    mig_profile = models.CharField(
        max_length=16,
        blank=True,
        default="",
        validators=[mig_profile_validator],
        help_text="The MIG profile each partition has, e.g. 1g.10gb (MIG flavors only).",
    )
    # Its network topology: node label keys, coarse to fine (a block, a rack, a host, an
    # NVLink domain), along which a production gang may ask to be kept together.
    topology = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_topology],
        help_text="Node label keys of its network levels, coarse to fine, e.g. "
        "network.topology.kubernetes.io/block, network.topology.kubernetes.io/rack.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # What the reconciler last saw on the cluster: GPUs of this product not requested by
    # any bound pod, and nodes with every GPU free. Admission uses them (when fresh) so
    # that it does not admit what cannot be placed.
    observed_free_gpus = models.PositiveIntegerField(null=True, blank=True, editable=False)
    observed_free_nodes = models.PositiveIntegerField(null=True, blank=True, editable=False)
    # And its ready nodes of this product: fewer than node_count is a catalogue that
    # promises nodes the cluster does not have (see missing_nodes).
    observed_nodes = models.PositiveIntegerField(null=True, blank=True, editable=False)
    # Where its whole free nodes are: ``{"levels": [...], "nodes": [[[value per level],
    # count], ...]}`` (clusters.queue.free_domains), for admission per topology domain.
    observed_free_domains = models.JSONField(null=True, blank=True, editable=False)
    observed_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def total_gpus(self) -> int:
        """GPUs of this flavor in the whole fleet."""
        return self.gpus_per_node * self.node_count

    @property
    def uses_dra(self) -> bool:
        """Whether workers claim their GPUs through DRA (a ResourceClaimTemplate) rather
        than the ``nvidia.com/gpu`` extended resource."""
        return self.device_mode in (DeviceMode.DRA, DeviceMode.MIG)

    @property
    def dra_device_class(self) -> str:
        """The DeviceClass a DRA flavor's claims name ("" for an extended-resource flavor)."""
        if not self.uses_dra:
            return ""
        return self.device_class or DEFAULT_DEVICE_CLASS[DeviceMode(self.device_mode)]

    @property
    def devices_in_words(self) -> str:
        """How a worker's GPUs are requested, as the catalogue and the API say it."""
        if self.device_mode == DeviceMode.MIG:
            return f"MIG {self.mig_profile} partitions (DRA, {self.dra_device_class})"
        if self.device_mode == DeviceMode.DRA:
            return f"whole GPUs (DRA, {self.dra_device_class})"
        return "whole GPUs (nvidia.com/gpu)"

    @property
    def dra_selectors(self) -> list[str]:
        """The CEL expressions a claimed device must match: the MIG profile, then the
        flavor's own selector."""
        out = []
        if self.device_mode == DeviceMode.MIG and self.mig_profile:
            out.append(f'device.attributes["{NVIDIA_DRIVER}"].profile == "{self.mig_profile}"')
        if self.uses_dra and self.device_selector.strip():
            out.append(self.device_selector.strip())
        return out

    @property
    def can_grow(self) -> bool:
        """Whether the node group can grow beyond ``node_count``."""
        return (self.max_node_count or 0) > self.node_count

    @property
    def missing_nodes(self) -> int:
        """Nodes the catalogue lists that the cluster was last seen without and that no
        autoscaler adds (a node group that can grow gets them on demand); 0 when none
        are missing or the cluster has not been read yet."""
        if self.observed_nodes is None or self.can_grow:
            return 0
        return max(self.node_count - self.observed_nodes, 0)

    @property
    def nodes_warning(self) -> str:
        """What the catalogue and pages say of a flavor with :attr:`missing_nodes` ("")."""
        if not self.missing_nodes:
            return ""
        return (
            f"The cluster has {self.observed_nodes} of the {self.node_count} {self.name} "
            f"nodes the catalogue lists, and its node group cannot grow: the catalogue "
            f"counts {self.missing_nodes * self.gpus_per_node} GPUs that do not exist."
        )

    @property
    def most_nodes(self) -> int:
        """The most nodes the flavor can ever have (what "can this ever fit" is judged by)."""
        return max(self.node_count, self.max_node_count or 0)

    @property
    def max_gpus(self) -> int:
        """GPUs of this flavor once its node group has grown to its maximum."""
        return self.gpus_per_node * self.most_nodes

    def clean(self) -> None:
        super().clean()
        self._clean_devices()
        if self.max_node_count is not None and self.max_node_count < self.node_count:
            raise ValidationError(
                {
                    "max_node_count": (
                        f"At least node_count ({self.node_count}): the node group cannot "
                        "shrink below the nodes it has."
                    )
                }
            )

    def _clean_devices(self) -> None:
        from tenants.cel import selector_problem  # the CEL library loads on first use

        errors: dict[str, str] = {}
        if self.device_mode == DeviceMode.MIG and not self.mig_profile:
            errors["mig_profile"] = "A MIG flavor names the profile of its partitions."
        if self.device_mode != DeviceMode.MIG and self.mig_profile:
            errors["mig_profile"] = "Only a MIG flavor has a MIG profile."
        if not self.uses_dra and (self.device_class or self.device_selector.strip()):
            field = "device_class" if self.device_class else "device_selector"
            errors[field] = (
                "An extended-resource flavor requests nvidia.com/gpu; a device class and "
                "selector are for DRA flavors."
            )
        if self.uses_dra and self.sharing:
            errors["sharing"] = (
                "KAI's fractional GPUs share extended-resource GPUs; a DRA flavor claims "
                "whole devices (use a MIG flavor for hardware-isolated slices)."
            )
        if self.uses_dra and self.device_selector.strip():
            problem = selector_problem(self.device_selector.strip())
            if problem:
                errors["device_selector"] = problem
        if errors:
            raise ValidationError(errors)


class Quota(TenantOwned):
    """A tenant's GPU quota on one flavor: nominal GPUs, how much it may borrow, and how
    much of its unused nominal it lends.

    Borrowing takes from the unused nominal quota of other tenants in the same cohort,
    up to ``borrow_limit`` GPUs beyond ``gpus``. ``lend_limit`` caps what others may
    borrow of this tenant's unused nominal (Kueue's ``lendingLimit``): the rest,
    ``gpus - lend_limit``, stays reserved for the tenant even while it is idle. ``None``
    lends all of it.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="quotas")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="quotas")
    gpus = models.PositiveIntegerField(default=0, validators=[MaxValueValidator(1_000_000)])
    borrow_limit = models.PositiveIntegerField(default=0, validators=[MaxValueValidator(1_000_000)])
    lend_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(1_000_000)],
        help_text="GPUs of the unused nominal quota others in the cohort may borrow "
        "(empty: all of it).",
    )

    class Meta:
        ordering = ["tenant__slug", "flavor__name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "flavor"], name="quota_unique"),
            models.CheckConstraint(
                condition=Q(lend_limit__isnull=True) | Q(lend_limit__lte=models.F("gpus")),
                name="quota_lends_at_most_nominal",
                violation_error_message="A tenant cannot lend more than its nominal quota.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant}: {self.gpus}(+{self.borrow_limit}) x {self.flavor}"


class AuditEventQuerySet(models.QuerySet["AuditEvent"]):
    """Audit events a user may read: everything for platform admins; their tenants' for
    tenant admins; nothing for others."""

    def visible_to(self, user: AbstractBaseUser | AnonymousUser) -> AuditEventQuerySet:
        if _is_platform_admin(user):
            return self.all()
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(tenant__memberships__user=user.pk, tenant__memberships__role=Role.ADMIN)

    def unscoped(self) -> AuditEventQuerySet:
        return self.all()


class AuditEvent(models.Model):
    """Who did what, when, to which object, in which tenant, under which request id.

    Written in the same transaction as the change it records, so there is never a
    change without its audit row nor an audit row for a change that rolled back.
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    actor_name = models.CharField(max_length=150, help_text="Kept when the user is deleted.")
    action = models.CharField(max_length=64)  # indexed in Meta, without a LIKE-only twin
    tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    tenant_slug = models.CharField(max_length=40, blank=True)
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=128)
    object_repr = models.CharField(max_length=200, blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    data = models.JSONField(default=dict, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        # Filtered by exact action only (tenants/filters.py): ``db_index`` would add a
        # LIKE-only index beside the plain one, written by every audited change.
        indexes = [models.Index(fields=["action"], name="auditevent_action")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.object_repr}"


# Users' SSH keys live in their own module; imported here so the app registers them.
from tenants.ssh_keys import SshKey  # noqa: E402, F401
