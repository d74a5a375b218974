"""``manage.py seed_demo_service``: the demo service of ``make run`` (idempotent).

Requested as the demo tenant admin ``ada`` of ``vision`` would from the dashboard: a dev
service ``text-to-image`` on one L4 worker, shaped as KubeRay's StableDiffusion sample
(an ``APIIngress`` and a ``StableDiffusionV2`` deployment with ``num_gpus: 1``). Its
model is the CPU stand-in ``demo_serve.text_to_image``, which kubesim's real Ray heads
import from the repository (docs/services.md); on a simulated head Serve answers for it.
Runs after ``seed_demo``; a service of that name that exists (in any state) is left alone.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from demo_serve.serve_config import SERVE_CONFIG

NAME = "text-to-image"
TENANT = "vision"
REQUESTER = "ada"
FLAVOR = "l4"


class Command(BaseCommand):
    help = "Request the demo service text-to-image for the demo tenant (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        from clusters.kinds.rayservice.requests import service_create
        from clusters.kinds.rayservice.spec import ServiceSpec
        from clusters.models import ClusterRequest
        from clusters.rows.spec import ClusterSpec
        from tenants.models import GpuFlavor, Tenant

        tenant = Tenant.objects.get(slug=TENANT)
        if ClusterRequest.objects.unscoped().filter(tenant=tenant, name=NAME).exists():
            self.stdout.write(f"Demo service {NAME!r} of {TENANT!r} exists: left as it is.")
            return
        actor = get_user_model().objects.get(username=REQUESTER)
        spec = ClusterSpec(
            kind="dev", flavor=GpuFlavor.objects.get(name=FLAVOR), workers=1, name=NAME
        )
        service_create(
            actor=actor, tenant=tenant, spec=spec, service=ServiceSpec(serve_config=SERVE_CONFIG)
        )
        self.stdout.write(
            f"Demo service {NAME!r} requested for {TENANT!r} as {REQUESTER!r} "
            f"(GET /imagine?prompt=... on its serve service)."
        )
