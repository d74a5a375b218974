"""Each member's health as the beat task sees it: reachable or not (with the error),
the API's latency, its Kubernetes version and the operators it serves. A member that
cannot be reached is recorded as such; the probe never raises."""

from __future__ import annotations

import logging
from typing import Any

from django.utils import timezone

from clusters.kube.connection import gateway_for
from clusters.kube.errors import KubeError
from clusters.members import checks
from clusters.models import KubeCluster
from controlplane.sealed import UnsealError

logger = logging.getLogger(__name__)


def kube_cluster_probe(member: KubeCluster) -> dict[str, Any]:
    """Look at ``member``'s API server now and write what was seen on its row; the
    fields written."""
    server = member.server or "settings' cluster"
    fields: dict[str, Any] = {"checked_at": timezone.now()}
    try:
        seen = checks.probe(gateway_for(member), server=server)
    except checks.CheckFailed as exc:
        fields.update(reachable=False, health_message=exc.message[:500])
    except (KubeError, UnsealError) as exc:  # no gateway could be built
        fields.update(reachable=False, health_message=str(exc)[:500])
    else:
        missing = checks.missing_crds(seen)
        fields.update(
            reachable=True,
            api_latency_ms=seen.api_latency_ms,
            kubernetes_version=seen.kubernetes_version,
            operators=seen.operators,
            health_message=f"Missing custom resources: {', '.join(missing)}." if missing else "",
        )
    KubeCluster.objects.filter(pk=member.pk).update(**fields)
    return fields


def fleet_probe() -> dict[str, bool]:
    """Probe every member, one after another; member name -> reachable."""
    seen: dict[str, bool] = {}
    for member in KubeCluster.objects.order_by("placement_order", "name"):
        try:
            seen[member.name] = bool(kube_cluster_probe(member)["reachable"])
        except Exception:  # one member's surprise must not hide the others' health
            logger.exception("probing Kubernetes cluster %s failed", member.name)
            seen[member.name] = False
    return seen
