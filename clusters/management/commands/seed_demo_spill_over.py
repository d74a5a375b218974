"""``manage.py seed_demo_spill_over``: make run's spill-over scene (idempotent).

speech's engineers ask for L4 dev clusters until onprem's L4 nodes are all taken (with
vision's demo service), then sam asks for one more: the admission pass this command runs
places it on the member ``cloud``, and its timeline says why ("admitted to run in cloud
(onprem is full)"). ``seed_demo_fleet`` runs it once the fleet is registered (after
``seed_demo_service``); if any of its requests exists (in any state) it does nothing, so
a restarted make run keeps them.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

TENANT = "speech"
FLAVOR = "l4"
# (requester, name, workers): the first two fill onprem's L4s beside vision's service,
# the last one spills over to cloud.
SCENE = [("emma", "emma-l4-sweep", 2), ("eve", "eve-l4-notebook", 1), ("sam", "sam-l4-eval", 1)]
SPILLED = "sam-l4-eval"


class Command(BaseCommand):
    help = "Fill onprem's L4s and spill one more L4 request over to cloud (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        from django.contrib.auth import get_user_model

        from clusters.models import ClusterRequest
        from clusters.queue.admission_pass import run_admission_pass
        from clusters.requests.services import cluster_request_create
        from clusters.rows.spec import ClusterSpec
        from tenants.models import GpuFlavor, Tenant

        tenant = Tenant.objects.get(slug=TENANT)
        names = [name for _, name, _ in SCENE]
        if ClusterRequest.objects.unscoped().filter(tenant=tenant, name__in=names).exists():
            self.stdout.write("The spill-over scene exists: left as it is.")
            return
        flavor = GpuFlavor.objects.get(name=FLAVOR)
        requesters = [user for user, _, _ in SCENE]
        users = get_user_model().objects.in_bulk(requesters, field_name="username")
        for username, name, workers in SCENE:
            spec = ClusterSpec(kind="dev", flavor=flavor, workers=workers, name=name)
            cluster_request_create(actor=users[username], tenant=tenant, spec=spec)
            # One pass per request: each is placed before the next is asked for, as
            # they would be a minute apart.
            run_admission_pass()
        spilled = ClusterRequest.objects.unscoped().select_related("kube_cluster")
        where = spilled.get(tenant=tenant, name=SPILLED).kube_cluster
        self.stdout.write(
            f"Spill-over: {TENANT}'s {SPILLED} runs on {where or 'no cluster yet'} "
            "(onprem's L4s are taken)."
        )
