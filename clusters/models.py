"""The Ray cluster request and its event history.

A :class:`ClusterRequest` row is the desired state of one Ray cluster: Celery messages
only nudge the code that converges Kubernetes towards it (DESIGN "Data flow"). The
``queue_*`` fields are written by the admission pass for requests that wait; the
``attempts``/``progress_at`` pair lets the sweeper find rows whose nudge was lost.
"""

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


class QueuedGpus(models.Model):
    """GPUs (and CPU, memory) a running request asks for beside those it holds, queued
    by the admission pass: what they take, when asked and admitted, and their standing
    while they wait (a :class:`Surge` or a :class:`Growth`)."""

    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="+")
    gpus = models.DecimalField(max_digits=10, decimal_places=3)
    cpu = models.DecimalField(max_digits=12, decimal_places=3, default=Decimal("0"))
    memory_gib = models.DecimalField(max_digits=12, decimal_places=3, default=Decimal("0"))
    created_at = models.DateTimeField(auto_now_add=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    queue_position = models.PositiveIntegerField(null=True, blank=True)
    queue_reason = models.CharField(max_length=32, blank=True)
    queue_message = models.CharField(max_length=500, blank=True)
    queue_eta = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


class Surge(QueuedGpus):
    """GPUs a running request needs for a while beside those it holds: its surge.

    A kind records one when a change it is asked for needs a second gang of GPUs before
    the first gives its own back (a service's upgrade to a new Ray cluster). The admission
    pass sees a waiting surge as queued demand of its request (same tenant, owner, kind
    and priority) and writes its standing here; once admitted (``admitted_at``) it holds
    its GPUs like an admitted gang, with a usage span of its own, until the kind releases
    it (the row is deleted). ``purpose`` says what it is for in a word ("upgrade");
    ``change`` is the kind's own record of it (the shared code never reads it);
    ``applied_at`` is when the kind carried it out.
    """

    request = models.OneToOneField(
        ClusterRequest, on_delete=models.CASCADE, primary_key=True, related_name="surge"
    )
    purpose = models.CharField(
        max_length=40, default="surge", help_text="What it is for, as messages say it."
    )
    change = models.JSONField(default=dict, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"surge of {self.request_id}: {self.gpus} GPUs"


class Growth(QueuedGpus):
    """Workers a running request asks for beyond the guaranteed size it is charged at
    (a kind that grows, :attr:`~clusters.domain.workload_kinds.Kind.grows`): its growth.

    Waiting, the admission pass queues it as a gang of ``workers`` (its GPUs, CPU and
    memory) and writes its standing here; admitted (``admitted_at``), it holds them as
    borrowable GPUs that a reclaim takes back by shrinking the request (the row is
    deleted), never by evicting it.
    """

    request = models.OneToOneField(
        ClusterRequest, on_delete=models.CASCADE, primary_key=True, related_name="growth"
    )
    workers = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"growth of {self.request_id}: {self.workers} workers"


class Job(models.Model):
    """The batch part of a job request: what it runs, and how its run went.

    One row per :class:`ClusterRequest` whose ``workload`` is ``job`` (same primary key).
    The request carries the shape, the queue and the state; this carries the entrypoint
    and ``runtime_env`` the RayJob is built from, the limits the user set, and what
    KubeRay reported of the run (Ray's job id and status, the RayCluster it made, the
    driver's message, start and end). ``host`` is set when the job runs on one of its
    owner's ready dev clusters instead of a Ray cluster of its own (then it takes no GPUs).
    ``log_tail`` keeps the end of the driver's output once the job finished, so its logs
    can be read after its pods are gone (NULL until it was read).
    """

    request = models.OneToOneField(
        ClusterRequest, on_delete=models.CASCADE, primary_key=True, related_name="job"
    )
    entrypoint = models.TextField()
    runtime_env = models.JSONField(default=dict, blank=True)
    active_deadline_seconds = models.PositiveIntegerField(null=True, blank=True)
    ttl_seconds_after_finished = models.PositiveIntegerField(default=0)
    host = models.ForeignKey(
        ClusterRequest,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="hosted_jobs",
        help_text="The dev cluster the job runs on, when it runs on an existing one.",
    )
    ray_job_id = models.CharField(max_length=128, blank=True)
    ray_cluster_name = models.CharField(max_length=128, blank=True)
    job_status = models.CharField(
        max_length=16, blank=True, help_text="Ray's status of the job (PENDING, RUNNING, ...)."
    )
    message = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    log_tail = models.TextField(null=True, blank=True)

    def __str__(self) -> str:
        return f"job {self.request_id}: {self.entrypoint[:40]}"


class Service(models.Model):
    """The serving part of a service request: its Serve config, how it is upgraded, and
    what KubeRay last reported of it.

    One row per :class:`ClusterRequest` whose ``workload`` is ``service`` (same primary
    key). The request carries the shape, the queue and the state; this carries the
    ``serveConfigV2`` YAML and the upgrade strategy the RayService is built from, and
    the applications' statuses, the active and pending RayClusters and whether an
    upgrade is in progress, as folded from the RayService's status.
    """

    request = models.OneToOneField(
        ClusterRequest, on_delete=models.CASCADE, primary_key=True, related_name="service"
    )
    serve_config = models.TextField(help_text="Ray Serve's config (serveConfigV2), as YAML.")
    upgrade_type = models.CharField(max_length=40, default="NewCluster")
    upgrade_options = models.JSONField(default=dict, blank=True)
    applications = models.JSONField(default=dict, blank=True)
    active_cluster = models.CharField(max_length=128, blank=True)
    pending_cluster = models.CharField(max_length=128, blank=True)
    upgrading = models.BooleanField(default=False)
    # An incremental upgrade's split by side ("active", "pending"): each cluster's
    # targetCapacity and trafficRoutedPercent as KubeRay reports them (empty: no split).
    traffic = models.JSONField(default=dict, blank=True)
    serve_endpoints = models.PositiveIntegerField(default=0)
    # The worker group's maxReplicas last written on ``capped_cluster`` (its guaranteed
    # size plus the growth admitted; null: not written yet).
    worker_cap = models.PositiveIntegerField(null=True, blank=True)
    capped_cluster = models.CharField(max_length=128, blank=True)
    public = models.BooleanField(
        default=False, help_text="Whether its endpoint answers callers without a token."
    )
    requests_total = models.PositiveBigIntegerField(
        default=0, help_text="Requests relayed through its endpoint (flushed from Redis)."
    )
    scale_to_zero = models.BooleanField(
        default=False,
        help_text="Whether it gives its GPUs back after a window without endpoint requests.",
    )
    scale_to_zero_after_minutes = models.PositiveIntegerField(
        default=30, help_text="The window without requests after which it scales to zero."
    )
    last_request_at = models.DateTimeField(
        null=True, blank=True, help_text="The last request relayed (flushed from Redis)."
    )
    woken_at = models.DateTimeField(
        null=True, blank=True, help_text="When a request woke it from zero (until it serves)."
    )

    def __str__(self) -> str:
        return f"service {self.request_id}"


class ServiceToken(models.Model):
    """A scoped token that may invoke one service's endpoint and nothing else.

    Stored as the SHA-256 digest of the secret (shown once at creation) and its first
    characters (``prefix``) to tell tokens apart in lists; revoking deletes the row.
    """

    service = models.ForeignKey(Service, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=64)
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}...)"


class ClusterEvent(models.Model):
    """One state transition (or notable moment) of a cluster request, for its history."""

    cluster = models.ForeignKey(ClusterRequest, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(auto_now_add=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    actor_name = models.CharField(max_length=150, default="system")
    from_state = models.CharField(max_length=16, blank=True)
    to_state = models.CharField(max_length=16)
    reason = models.CharField(max_length=64)
    message = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.cluster}: {self.from_state} -> {self.to_state} ({self.reason})"


class GpuSpan(TenantOwned):
    """A stretch of time a cluster held GPUs (abstract): who and what, copied so that the
    ledger survives renames and deletions; open while ``ended_at`` is empty."""

    username = models.CharField(max_length=150)
    flavor_name = models.CharField(max_length=40)
    gpus = models.DecimalField(max_digits=10, decimal_places=3)
    started_at = models.DateTimeField(db_index=True)
    ended_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        abstract = True
        ordering = ["started_at", "id"]

    @staticmethod
    def one_open(name: str) -> models.UniqueConstraint:
        """At most one open span per cluster."""
        return models.UniqueConstraint(
            fields=["cluster"], condition=Q(ended_at__isnull=True), name=name
        )


class UsageSpan(GpuSpan):
    """One stretch of time during which a cluster held GPUs: the usage ledger.

    Opened when a request enters a quota-holding state (admission), closed when it leaves
    (suspension, deletion finished, failure). A suspended-then-resumed cluster has one
    span per admission; an admitted :class:`Surge` has its own (``surge``) beside it.
    GPU-hours are ``gpus x (ended_at or now - started_at)``.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="usage_spans")
    cluster = models.ForeignKey(
        ClusterRequest, on_delete=models.CASCADE, related_name="usage_spans"
    )
    kind = models.CharField(max_length=8, choices=ClusterKind.choices)
    surge = models.BooleanField(
        default=False, help_text="Held by the request's surge (Surge), beside its own GPUs."
    )

    class Meta(GpuSpan.Meta):
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "surge"],
                condition=Q(ended_at__isnull=True),
                name="one_open_span_each",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster}: {self.gpus} GPUs from {self.started_at}"


class IdleSpan(GpuSpan):
    """One stretch of time during which a cluster held GPUs and Ray showed it unused.

    Opened when the activity check first finds the cluster idle, back-dated to its last
    activity (never before its GPUs were taken); closed when it is in use again or gives
    its GPUs back. Usage reports subtract these from the usage spans to split GPU-hours
    into active and idle, so that a team lead sees what idleness costs.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="idle_spans")
    cluster = models.ForeignKey(ClusterRequest, on_delete=models.CASCADE, related_name="idle_spans")

    class Meta(GpuSpan.Meta):
        constraints = [GpuSpan.one_open("one_open_idle_span")]

    def __str__(self) -> str:
        return f"{self.cluster}: idle with {self.gpus} GPUs from {self.started_at}"


class PendingPass(models.Model):
    """A pass (admission, reconcile or provision) somebody asked for that has not started.

    One row per pass. A nudge sets ``requested_at`` only when it is empty, and only the
    nudge that set it sends a Celery message; the task empties it as it starts, before it
    reads anything. So a burst of nudges costs one message and one pass, yet every nudge
    is followed by a pass that starts after it — what the burst changed is never missed.
    A message lost after the claim leaves ``requested_at`` set, and the sweeper re-sends
    it once it is stale: the row is the outbox.

    ``started_at`` is when the last pass started. A pass asked for sooner than its
    interval after that (``ADMISSION_PASS_INTERVAL_SECONDS`` and the like) is
    sent to start when the interval ends: a stream of nudges then costs a bounded number
    of passes per second, each over a larger batch, while a nudge on a quiet system
    still starts a pass at once.
    """

    name = models.CharField(max_length=32, primary_key=True)
    requested_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} pass (requested {self.requested_at or 'never'})"


class Tunnel(models.Model):
    """One TCP connection carried to a cluster's head through the product (``gangway
    port-forward`` or ``gangway ssh``): who, which port, when it opened and closed, and the
    bytes each way. Open rows (``closed_at`` empty, seen within the heartbeat) are use
    of the cluster for idle detection (clusters/engine/tunnel_activity.py)."""

    cluster = models.ForeignKey(ClusterRequest, on_delete=models.CASCADE, related_name="tunnels")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    username = models.CharField(max_length=150)
    port = models.PositiveIntegerField()
    purpose = models.CharField(max_length=16, default="port-forward")
    opened_at = models.DateTimeField(auto_now_add=True)
    seen_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    bytes_in = models.BigIntegerField(default=0)
    bytes_out = models.BigIntegerField(default=0)
    close_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        indexes = [models.Index(fields=["cluster", "closed_at"], name="tunnel_cluster_open")]

    def __str__(self) -> str:
        return f"{self.username} to {self.cluster}:{self.port} ({self.purpose})"
