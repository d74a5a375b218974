"""The Ray cluster request: the desired state of one workload, from the queue to its
deletion (DESIGN "Data flow"); its queue fields are written by the admission pass."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from clusters.domain.states import LIVE, State
from tenants.models import GpuFlavor, Tenant, TenantOwned, TenantOwnedQuerySet


class ClusterKind(models.TextChoices):
    """Dev clusters have single-GPU workers; prod clusters take whole GPU nodes."""

    DEV = "dev", "Development"
    PROD = "prod", "Production"


class Workload(models.TextChoices):
    """What a request runs: an interactive Ray cluster, a batch job (a RayJob) whose
    Ray cluster lives only as long as its driver runs, or a long-running Ray Serve
    service (a RayService)."""

    CLUSTER = "cluster", "Cluster"
    JOB = "job", "Job"
    SERVICE = "service", "Service"


class TopologyMode(models.TextChoices):
    """How a gang asks to share a topology level: all in one domain, or as few as can be."""

    REQUIRED = "required", "Required: all workers in one domain"
    PREFERRED = "preferred", "Preferred: as few domains as possible"


class ClusterRequestQuerySet(TenantOwnedQuerySet):
    """Cluster requests: ``live()`` keeps those that still exist for their owner,
    ``not_deleted()`` drops only deleted ones (a failed request is still shown)."""

    def live(self) -> ClusterRequestQuerySet:
        return self.filter(state__in=LIVE)

    def not_deleted(self) -> ClusterRequestQuerySet:
        return self.exclude(state=State.DELETED)


class ClusterRequest(TenantOwned):
    """One engineer's request for a Ray cluster, from the queue to its deletion.

    A batch job is a request too (``workload`` ``job``, its entrypoint and run in
    :class:`Job`): it waits in the same queue, is charged and admitted the same way, and
    its Ray cluster has the same shape; only what runs on it, and its states, differ.

    ``name`` is the Kubernetes name of the RayCluster (DNS-1035, at most 53 characters),
    unique per tenant among requests that are not deleted, and the tenant's namespace
    holds it, so the object's identity is deterministic from the row. ``gpus``, ``cpu``
    and ``memory_gib`` are what the whole gang requests; they are computed from the shape
    when the row is written and are what admission charges against quotas.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="clusters")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="clusters"
    )
    name = models.CharField(max_length=53)
    # Indexed in Meta, as a plain b-tree: ``db_index`` would add a second, LIKE-only
    # index (see Meta.indexes).
    workload = models.CharField(max_length=8, choices=Workload.choices, default=Workload.CLUSTER)
    kind = models.CharField(max_length=8, choices=ClusterKind.choices, default=ClusterKind.DEV)
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="clusters")
    accepted_flavors = models.JSONField(
        default=list,
        blank=True,
        help_text="The GPU flavors the request accepts, by name, in order of preference "
        "(empty: only flavor). flavor is the first of them while it waits and the one it "
        "was admitted on once admitted.",
    )
    # Where the gang runs: the Kubernetes cluster admission placed it on (empty while it
    # waits), and what the request asked of placement (a cluster or a region, or neither).
    kube_cluster = models.ForeignKey(
        "clusters.KubeCluster", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    wanted_kube_cluster = models.ForeignKey(
        "clusters.KubeCluster", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    wanted_region = models.CharField(max_length=63, blank=True)
    # What a production gang asks of the network: that its workers share one domain of a
    # level of its flavor's topology (a rack, a block, an NVLink domain; docs/topology.md).
    topology_level = models.CharField(max_length=316, blank=True)
    topology_mode = models.CharField(max_length=9, choices=TopologyMode.choices, blank=True)
    # The domain admission pinned the gang to: the value of its ``topology_level`` label
    # on the nodes its workers run on (built-in: chosen by the pass; Kueue and KAI: their
    # topology assignment, mirrored). "": none chosen yet, or none asked.
    topology_domain = models.CharField(max_length=63, blank=True)
    workers = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(0), MaxValueValidator(1024)]
    )
    min_workers = models.PositiveIntegerField(null=True, blank=True)
    max_workers = models.PositiveIntegerField(null=True, blank=True)
    gpu_fraction = models.DecimalField(
        max_digits=4,
        decimal_places=3,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0.001")), MaxValueValidator(Decimal("0.999"))],
    )
    priority = models.IntegerField(default=0)
    ttl_hours = models.PositiveIntegerField(null=True, blank=True)
    image = models.CharField(
        max_length=255,
        blank=True,
        help_text="The Ray image of its head and workers, from RAY_IMAGE_ALLOWLIST (empty on "
        "older rows: the default image).",
    )
    env = models.JSONField(
        default=dict,
        blank=True,
        help_text="Environment variables set on its Ray containers, {name: value}, checked "
        "by clusters.environment.validate_env.",
    )
    container_gpus = models.BooleanField(
        default=False,
        help_text="Ray runtime environments that run containers see exactly the pod's GPUs: "
        "each GPU worker writes a CDI spec of its own GPUs (docs/containers.md).",
    )
    notebook = models.BooleanField(
        default=False,
        help_text="The head runs JupyterLab, reached through the product's proxy by the "
        "owner and the tenant's admins (docs/notebooks.md).",
    )
    ssh = models.BooleanField(
        default=False,
        help_text="The head runs an SSH server on its port named ssh, accepting the keys of "
        "the owner and the tenant's admins (docs/tunnels.md).",
    )

    gpus = models.DecimalField(max_digits=10, decimal_places=3, default=Decimal("0"))
    cpu = models.DecimalField(max_digits=12, decimal_places=3, default=Decimal("0"))
    memory_gib = models.DecimalField(max_digits=12, decimal_places=3, default=Decimal("0"))

    # Indexed by Meta's (state, progress_at), whose leading column serves every lookup
    # by state.
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    holds_gpus = models.BooleanField(
        default=False,
        db_index=True,
        help_text="Whether the request currently holds its GPUs against the quota: set on "
        "admission, cleared on suspension, failure or once a deletion finished.",
    )
    state_reason = models.CharField(max_length=500, blank=True)
    last_error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    deletion_reason = models.CharField(max_length=32, blank=True)

    queue_position = models.PositiveIntegerField(null=True, blank=True)
    queue_flavor_position = models.PositiveIntegerField(null=True, blank=True)
    queue_reason = models.CharField(max_length=32, blank=True)
    queue_message = models.CharField(max_length=500, blank=True)
    queue_eta = models.DateTimeField(null=True, blank=True)
    queue_flavors = models.JSONField(
        default=list,
        blank=True,
        help_text="While a request that accepts several flavors waits: its standing on "
        "each, [{flavor, position, reason, message, eta}] in its order of preference.",
    )
    earmarked_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Set while borrowed quota is being (or was) reclaimed for this queued "
        "request: what the reclaim frees is promised to it until it is admitted.",
    )
    reclaim_after = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Set when another tenant needs this borrowed capacity back: the cluster "
        "is suspended (never deleted) at this time unless the need goes away.",
    )

    # Preemption that loses no work (docs/preemption.md). The class it runs in; when it
    # was told it will be preempted (its pods carry the notice until ``reclaim_after``,
    # the stop); the last checkpoint its run reported, handed to the next run after a
    # preemption as GANGWAY_RESUME_FROM (``resume_from``); how often it was preempted.
    priority_class = models.ForeignKey(
        "tenants.PriorityClass",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    notice_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the running request was told it will be preempted (stopped at "
        "reclaim_after unless the need goes away first).",
    )
    notice_reason = models.CharField(max_length=500, blank=True)
    checkpoint_uri = models.CharField(max_length=1000, blank=True)
    checkpointed_at = models.DateTimeField(null=True, blank=True)
    resume_from = models.CharField(
        max_length=1000,
        blank=True,
        help_text="The checkpoint its next run starts from (GANGWAY_RESUME_FROM).",
    )
    preemptions = models.PositiveIntegerField(default=0)

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    progress_at = models.DateTimeField(auto_now_add=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    ready_at = models.DateTimeField(null=True, blank=True)
    suspended_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    expiry_warned_at = models.DateTimeField(
        null=True, blank=True, help_text="When the owner was warned of the coming expiry."
    )
    # Idle reclaim (clusters/engine/idle.py): the last moment Ray (or a person on the
    # dashboard proxy) showed the cluster in use, when it was last read, and the warning.
    last_active_at = models.DateTimeField(
        null=True, blank=True, help_text="When the cluster was last seen in use."
    )
    activity_checked_at = models.DateTimeField(
        null=True, blank=True, help_text="When the cluster's activity was last read from Ray."
    )
    activity_note = models.CharField(
        max_length=300, blank=True, help_text="What the last activity read found, in words."
    )
    idle_warned_at = models.DateTimeField(
        null=True, blank=True, help_text="When the owner was warned the idle cluster is suspended."
    )
    held_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When an admin put the queued request on hold: the queue passes over it "
        "until it is released (the reason is in its timeline and hold_reason).",
    )
    hold_reason = models.CharField(max_length=500, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    gpus_released_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the request last gave its GPUs back (its pods were gone).",
    )
    # Capacity on demand (built-in queue): the ProvisioningRequest asked of the cluster
    # autoscaler for this request's nodes, and what became of it.
    capacity_request = models.CharField(max_length=253, blank=True)
    capacity_state = models.CharField(
        max_length=16,
        blank=True,
        choices=[
            ("requested", "Requested"),
            ("provisioned", "Provisioned"),
            ("failed", "Failed"),
        ],
    )
    capacity_requested_at = models.DateTimeField(null=True, blank=True)
    capacity_message = models.CharField(max_length=500, blank=True)
    capacity_attempts = models.PositiveIntegerField(default=0)
    # Set, in the transaction that changed the row, when its state asks for a
    # provisioning step (a deletion, a suspension, a job's RayJob to write); the
    # coalesced provision pass takes the marked rows and clears it
    # (clusters/engine/provisioning.py: take_requested).
    provision_requested_at = models.DateTimeField(null=True, blank=True)

    objects = ClusterRequestQuerySet.as_manager()  # type: ignore[misc]

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "name"],
                condition=~Q(state=State.DELETED),
                name="cluster_name_unique_while_not_deleted",
            ),
        ]
        # Every index is written again by each change of state (the new row version
        # cannot share the old one's index entries), several times per cluster in a
        # burst: no index that no query needs. ``db_index`` on the two CharFields had
        # given each a plain index and a LIKE-only one (varchar_pattern_ops), and state
        # a third beside this pair; nothing filters them with LIKE.
        indexes = [
            models.Index(fields=["state", "progress_at"]),
            models.Index(fields=["workload"], name="clusterrequest_workload"),
            # The provision pass's: only marked rows have an entry, a handful at a time.
            models.Index(
                fields=["provision_requested_at"],
                condition=Q(provision_requested_at__isnull=False),
                name="clusterrequest_provision_asked",
            ),
        ]

    def accepted_flavor_rows(self) -> list[GpuFlavor]:
        """The catalogue rows of the flavors it accepts, most preferred first: one query,
        only for a request that accepts several (a flavor gone from the catalogue is
        left out)."""
        names = list(self.accepted_flavors or [])
        if len(names) < 2:
            return [self.flavor]
        found = GpuFlavor.objects.in_bulk(names, field_name="name")
        return [found[name] for name in names if name in found]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.name}"

    @property
    def namespace(self) -> str:
        """The Kubernetes namespace the cluster lives in (its tenant's)."""
        return self.tenant.namespace
