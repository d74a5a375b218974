"""``manage.py seed_demo_fleet <server> --token <token>``: make run's fleet (idempotent).

The member settings bootstrap (the first kubesim, the H100s) is named ``onprem`` when it
still has the migration's name ``default``: a demo's choice, made here and not in the
migration, so that an upgraded deployment keeps its name. The second kubesim, ``cloud``
(L4 nodes that autoscale), is registered at ``server`` with ``token``, after ``onprem`` in
the placement order. Each flavor's stock per member is written once; the flavor's own
node counts become the fleet's totals. Then ``seed_demo_spill_over`` sets the scene that
shows spill-over. Runs after ``seed_demo`` and ``seed_demo_service``.
"""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

# The cloud member's nodes (kubesim/fleets/cloud.yaml): its L4 node group.
CLOUD_STOCK = {"l4": (3, 8)}


class Command(BaseCommand):
    help = "Register make run's second kubesim as the fleet member 'cloud' (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("server", help="the cloud kubesim's address (http://host:port)")
        parser.add_argument("--token", required=True, help="a token the cloud kubesim knows")

    def handle(self, *args: Any, **options: Any) -> None:
        self.register(options)
        # The scene that shows spill-over, in this process: make run starts one less.
        call_command("seed_demo_spill_over", stdout=self.stdout)

    @transaction.atomic
    def register(self, options: dict[str, Any]) -> None:
        """The two members and each flavor's stock in them, in one transaction."""
        from clusters.members.stock import stock_set
        from clusters.models import FlavorStock, KubeCluster
        from controlplane.sealed import seal
        from tenants.models import GpuFlavor

        home, _ = KubeCluster.objects.get_or_create(
            from_settings=True, defaults={"name": "onprem", "placement_order": 0}
        )
        if home.name == "default" and not KubeCluster.objects.filter(name="onprem").exists():
            home.name = "onprem"
        home.region = home.region or "on-prem"
        home.save()
        cloud, created = KubeCluster.objects.get_or_create(
            name="cloud", defaults={"placement_order": 10, "region": "cloud"}
        )
        if created or cloud.server != options["server"]:
            cloud.server = options["server"]
            cloud.token_encrypted = seal(options["token"])
            cloud.labels = {"autoscaling": "true"}
            cloud.save()
        for flavor in GpuFlavor.objects.all():
            # What the flavor held before the fleet is the home member's (once); the
            # flavor's own counts become the sums (clusters.members.stock).
            if not FlavorStock.objects.filter(kube_cluster=home, flavor=flavor).exists():
                stock_set(
                    actor=None,
                    member=home,
                    flavor=flavor,
                    node_count=flavor.node_count,
                    max_node_count=flavor.max_node_count,
                )
            listed = FlavorStock.objects.filter(kube_cluster=cloud, flavor=flavor).exists()
            if flavor.name in CLOUD_STOCK and not listed:
                nodes, most = CLOUD_STOCK[flavor.name]
                stock_set(
                    actor=None, member=cloud, flavor=flavor, node_count=nodes, max_node_count=most
                )
        self.stdout.write(
            f"Fleet: {home.name} (settings' cluster) then cloud at {options['server']}."
        )
