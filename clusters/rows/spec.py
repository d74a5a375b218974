"""The create shape: what a requester asks for, typed, immutable and named once.

The API's create body, the dashboard's form and the dry-run all parse into a
:class:`ClusterSpec`; the service validates it once (:func:`clusters.requests.services.
cluster_request_check`) into an unsaved row, and the row gives the same spec back
(:attr:`clusters.models.ClusterRequest.spec`) to the admission snapshot and the manifests.
Adding a field to a request means adding it here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from decimal import Decimal
from typing import Any

from clusters.domain import shapes, workload_kinds
from clusters.models import ClusterKind, KubeCluster
from tenants.models import GpuFlavor, PriorityClass

# The geometry of a gang: what request_validation.validate_request and shapes.demand read.
SHAPE_FIELDS = ("kind", "workers", "min_workers", "max_workers", "gpu_fraction")


@dataclass(frozen=True, kw_only=True)
class ClusterSpec:
    """One cluster request as asked: ``flavor`` a catalogue row, the rest as in DESIGN's
    create body (``name`` ``None`` means "generate one"; ``ttl_hours`` ``None`` means
    the tenant's default for the kind)."""

    flavor: GpuFlavor
    kind: str = ClusterKind.DEV
    workers: int = 1
    name: str | None = None
    min_workers: int | None = None
    max_workers: int | None = None
    gpu_fraction: Decimal | None = None
    ttl_hours: int | None = None
    priority: int = 0
    # The platform priority class it runs in (None: the default class, resolved by
    # clusters.requests.priority_class when it is checked).
    priority_class: PriorityClass | None = None
    # Every flavor it accepts, by name, in order of preference, ``flavor`` first (empty:
    # only ``flavor``). See :meth:`flavor_names`.
    accepted_flavors: tuple[str, ...] = ()
    # What the pods run, not what they ask for (admission never reads these): the image
    # ("" means the default), environment variables and the nested-container opt-in.
    image: str = ""
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    container_gpus: bool = False
    notebook: bool = False
    # An SSH server on the head for ``gangway ssh`` (docs/tunnels.md).
    ssh: bool = False
    # The kind of row it is (a kind that grows is charged at its guaranteed size).
    workload: str = workload_kinds.DEFAULT_WORKLOAD
    # What it asks of placement: a member of the fleet, or a region (admission places it
    # there or keeps it waiting; clusters.admission.placement).
    wanted_kube_cluster: KubeCluster | None = None
    wanted_region: str = ""
    # What a production gang asks of the network: its workers in one domain of this level
    # of the flavor's topology, "required" or "preferred" (clusters.requests.placement_wish).
    topology_level: str = ""
    topology_mode: str = ""

    def __post_init__(self) -> None:
        # A row gives its JSON list back; a spec keeps a tuple (hashable, immutable).
        object.__setattr__(self, "accepted_flavors", tuple(self.accepted_flavors or ()))

    def flavor_names(self) -> tuple[str, ...]:
        """The flavors it accepts, most preferred first (just ``flavor`` if one)."""
        return self.accepted_flavors or (self.flavor.name,)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ClusterSpec:
        """From a parsed create body or form: keys named as the fields, absent or empty
        optional values taking their defaults."""
        given = {
            f.name: data[f.name]
            for f in fields(cls)
            if f.name in data and data[f.name] not in (None, "")
        }
        return cls(**given)

    def as_fields(self) -> dict[str, Any]:
        """Every field by name (the columns of a :class:`~clusters.models.ClusterRequest`)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def of(cls, cluster: Any) -> ClusterSpec:
        """The spec a saved or unsaved request row was built from. Its class is taken
        only when the row holds it already (an unsaved row, or one read with it): the
        admission snapshot reads rows without it and must not fetch it row by row."""
        given = {
            f.name: getattr(cluster, f.name) for f in fields(cls) if f.name not in CLASS_FIELDS
        }
        held = cluster._meta.get_field("priority_class")
        if held.is_cached(cluster):
            given["priority_class"] = held.get_cached_value(cluster)
        return cls(**given)

    def shape(self) -> dict[str, Any]:
        """The geometry fields, as keyword arguments of :mod:`clusters.domain.shapes`."""
        return {name: getattr(self, name) for name in SHAPE_FIELDS}

    def demand(self) -> shapes.Demand:
        """What the whole gang asks for on ``flavor``: what admission charges."""
        return shapes.demand(
            flavor=shapes.flavor_spec(self.flavor), **self.shape(), guaranteed=self.guaranteed()
        )

    def charged_workers(self) -> int:
        """The workers admission charges: an autoscaling cluster at its largest size, or
        at its guaranteed size for a kind that grows (:meth:`guaranteed`)."""
        return shapes.charged_workers(
            kind=self.kind,
            workers=self.workers,
            min_workers=self.min_workers,
            max_workers=self.max_workers,
            guaranteed=self.guaranteed(),
        )

    def guaranteed(self) -> bool:
        """Whether it is charged at its guaranteed size (``min_workers``): its kind grows
        into more only as the admission pass grants it (:attr:`Kind.grows`)."""
        return workload_kinds.grows(self.workload)

    def worker_gpus(self) -> Decimal:
        """One worker's GPUs: a whole node (prod), a fraction or one GPU (dev)."""
        if self.kind == ClusterKind.PROD:
            return Decimal(self.flavor.gpus_per_node)
        return Decimal(self.gpu_fraction) if self.gpu_fraction is not None else Decimal(1)

    def only_on(self, flavor: GpuFlavor) -> ClusterSpec:
        """The same request accepting ``flavor`` alone (one of its accepted flavors)."""
        return replace(self, flavor=flavor, accepted_flavors=())

    def on_flavor(self, flavor: GpuFlavor) -> ClusterSpec:
        """The same request on another flavor, unnamed, as the dry-run offers it: a dev
        request drops what only fits the flavor asked for (fractions, autoscaling)."""
        other = replace(self, flavor=flavor, name=None, accepted_flavors=())
        if self.kind == ClusterKind.DEV:
            other = replace(other, gpu_fraction=None, min_workers=None, max_workers=None)
        return other


# The fields of what the pods run: no part of a request's shape or demand, so the
# admission snapshot does not read them (``env`` would also be unhashable there).
PAYLOAD_FIELDS = ("image", "env", "container_gpus", "notebook", "ssh")
# Where it may run: read by the admission snapshot on their own (a member by its key),
# no part of the shape either.
PLACEMENT_FIELDS = ("wanted_kube_cluster", "wanted_region")
# Its class: read by the admission snapshot on its own (by its key), no part of the shape.
CLASS_FIELDS = ("priority_class",)
# The row's columns a spec is read back from for admission (the flavor by its key).
SPEC_COLUMNS = (
    *(
        f.name
        for f in fields(ClusterSpec)
        if f.name not in ("flavor", *PAYLOAD_FIELDS, *PLACEMENT_FIELDS, *CLASS_FIELDS)
    ),
    "flavor_id",
)
