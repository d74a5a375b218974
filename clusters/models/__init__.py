"""The clusters app's rows: the request (the desired state of one workload), what each
kind runs beside it, the GPUs it holds and asks for, its history and its tunnels.

A :class:`ClusterRequest` row is the desired state of one Ray cluster: Celery messages
only nudge the code that converges Kubernetes towards it (DESIGN "Data flow"). The
``queue_*`` fields are written by the admission pass for requests that wait; the
``attempts``/``progress_at`` pair lets the sweeper find rows whose nudge was lost.
"""

from clusters.models.costs import CostCap, CostReportMail, FlavorPrice
from clusters.models.gangs import Growth, QueuedGpus, Surge
from clusters.models.gpu_samples import GpuSample
from clusters.models.history import ClusterEvent, GpuSpan, IdleSpan, PendingPass, UsageSpan
from clusters.models.kube_clusters import (
    DrainMode,
    FlavorStock,
    KubeCluster,
    MemberQuotaCap,
    Schedulable,
)
from clusters.models.requests import (
    ClusterKind,
    ClusterRequest,
    ClusterRequestQuerySet,
    TopologyMode,
    Workload,
)
from clusters.models.tunnels import Tunnel
from clusters.models.workloads import Job, Service, ServiceToken

__all__ = [
    "ClusterEvent",
    "ClusterKind",
    "ClusterRequest",
    "ClusterRequestQuerySet",
    "CostCap",
    "CostReportMail",
    "DrainMode",
    "FlavorPrice",
    "FlavorStock",
    "GpuSample",
    "GpuSpan",
    "Growth",
    "IdleSpan",
    "Job",
    "KubeCluster",
    "MemberQuotaCap",
    "PendingPass",
    "QueuedGpus",
    "Schedulable",
    "Service",
    "ServiceToken",
    "Surge",
    "TopologyMode",
    "Tunnel",
    "UsageSpan",
    "Workload",
]
