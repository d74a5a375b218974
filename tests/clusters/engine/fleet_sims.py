"""Several kubesim processes as the members of a fleet, for the engine's fleet tests.

The first is the home member (the settings' cluster, through ``settings.KUBECONFIG``);
the others are registered as a platform admin would, by address (kubesim serves plain
HTTP and takes a request without a token as its admin's).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.utils import timezone

from clusters.domain.states import State
from clusters.engine import member_passes
from clusters.models import ClusterRequest, KubeCluster
from kubesim import KubeSim
from kubesim.clock import Clock
from tests.clusters.engine.conftest import device_plugin_fleet, running_kubesim


@dataclass
class Member:
    """One member: its row and the kubesim behind it."""

    row: KubeCluster
    sim: KubeSim

    def objects(self, kind: str) -> set[tuple[str, str]]:
        """(namespace, name) of every object kubesim keeps under ``kind`` (its storage
        key: ``rayclusters.ray.io``, ``namespaces``, ...)."""
        return {
            (o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in self.sim.list(kind)
        }

    def namespaces(self) -> set[str]:
        return {name for _, name in self.objects("namespaces")}

    def fresh(self) -> KubeCluster:
        self.row.refresh_from_db()
        return self.row

    def said(self, row: ClusterRequest) -> str:
        """What this member has of ``row``, for a test's timeout: its Workloads' conditions
        and checks, its RayService and RayClusters (with ``spec.managedBy`` and status) and
        each pod's phase and readiness."""
        namespace = row.tenant.namespace
        lines = [f"\n  {self.row.name}:"]
        for wl in self.sim.list("workloads.kueue.x-k8s.io", namespace):
            status = wl.get("status") or {}
            conditions = [
                f"{c['type']}={c['status']} {c.get('reason', '')}: {c.get('message', '')}"
                for c in status.get("conditions") or []
            ]
            checks = [f"{c['name']}={c['state']}" for c in status.get("admissionChecks") or []]
            lines.append(f"\n   workload {wl['metadata']['name']} {conditions} {checks}")
        for kind in ("rayservices.ray.io", "rayclusters.ray.io"):
            for found in self.sim.list(kind, namespace):
                status = found.get("status") or {}
                conditions = [
                    (c["type"], c["status"], c.get("reason"))
                    for c in status.get("conditions") or []
                ]
                lines.append(
                    f"\n   {kind.split('.')[0]} {found['metadata']['name']}"
                    f" managedBy={found['spec'].get('managedBy')!r}"
                    f" state={status.get('state') or status.get('serviceStatus')!r}"
                    f" conditions={conditions}"
                )
        for pod in self.sim.list("pods", namespace):
            status = pod.get("status") or {}
            ready = [c["status"] for c in status.get("conditions") or [] if c["type"] == "Ready"]
            lines.append(
                f"\n   pod {pod['metadata']['name']} on {pod['spec'].get('nodeName')!r}"
                f" {status.get('phase')} ready={ready}"
            )
        return "".join(lines)


@contextmanager
def fleet_of(
    tmp_path: Path,
    settings: Any,
    *names: str,
    clocks: Mapping[str, Clock] | None = None,
    kueue: bool = False,
) -> Iterator[dict[str, Member]]:
    """A kubesim per name on the demo fleet's device-plugin nodes (4 x 8 H100 each:
    :func:`device_plugin_fleet`), the first the home member; stopped after. ``clocks``: the
    clock of a member other than the home one, by name (the wall clock otherwise).
    ``kueue``: every kubesim runs Kueue's emulation (MultiKueue's too) and
    ``QUEUE_MODE=kueue``."""
    with ExitStack() as stack:
        home = stack.enter_context(
            running_kubesim(tmp_path, settings, kueue=kueue, fleet=device_plugin_fleet())
        )
        KubeCluster.objects.filter(from_settings=True).delete()
        members = {
            names[0]: Member(
                KubeCluster.objects.create(name=names[0], from_settings=True, placement_order=0),
                home,
            )
        }
        for order, name in enumerate(names[1:], start=1):
            clock = (clocks or {}).get(name)
            sim = KubeSim(
                fleet=device_plugin_fleet(), port=0, startup_delay=0.0, clock=clock, kueue=kueue
            ).start()
            stack.callback(sim.stop)
            row = KubeCluster.objects.create(name=name, server=sim.url, placement_order=order)
            members[name] = Member(row, sim)
        # Last out, first run: passes still running end before their kubesims stop.
        stack.callback(member_passes.wait_for_passes, 30.0)
        yield members


def admitted(
    tenant: Any, owner: Any, flavor: Any, name: str, member: Member | None
) -> ClusterRequest:
    """An admitted one-worker dev cluster placed on ``member`` (``None``: not placed, so
    on the home member), as admission leaves it."""
    return ClusterRequest.objects.create(
        tenant=tenant,
        owner=owner,
        name=name,
        kind="dev",
        flavor=flavor,
        workers=1,
        gpus=Decimal(1),
        cpu=Decimal(26),
        memory_gib=Decimal(233),
        state=State.ADMITTED,
        holds_gpus=True,
        admitted_at=timezone.now(),
        kube_cluster=member.row if member is not None else None,
    )
