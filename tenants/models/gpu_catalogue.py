"""The GPU catalogue: each flavor of GPU node, how its GPUs are requested from
Kubernetes (extended resource, DRA, MIG), its network topology, and each tenant's quota
on it.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from tenants.models.tenancy import Tenant, TenantOwned, dns_label_validator

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
