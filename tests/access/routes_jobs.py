"""Access table of the jobs API (submit, list, detail, stop, delete, logs, dry-run).
See ``tests/access/matrix.py`` for the vocabulary.

Routes on one job build their target in the ``kwargs`` builder: bob's queued dev job in
acme (a queued job can be read, stopped and deleted, and its logs say it has none yet,
so no Kubernetes API is needed).
"""

from __future__ import annotations

from typing import Any

from clusters.models import ClusterRequest, Job
from tenants.models import GpuFlavor
from tests.access.matrix import Case, Route, members

JOBS = "api/v1/tenants/{tenant_slug}/jobs/"
ONE = JOBS + "{name}/"
BODY = {"entrypoint": "python train.py", "flavor": "l4", "workers": 1}


def _bobs(name: str = "bob-job") -> Any:
    def build(w: Any) -> dict[str, str]:
        request, created = ClusterRequest.objects.get_or_create(
            tenant=w.acme,
            name=name,
            defaults={
                "owner": w.actors["engineer"],
                "workload": "job",
                "kind": "dev",
                "flavor": GpuFlavor.objects.get(name="l4"),
                "workers": 1,
                "gpus": 1,
                "state": "queued",
            },
        )
        if created:
            Job.objects.create(request=request, entrypoint="python train.py")
        return {"tenant_slug": "acme", "name": name}

    return build


READERS = members(viewer=200, engineer=200, admin=200, platform=200)
WRITERS = members(viewer=403, engineer=200, admin=200, platform=200)

ROUTES = {
    JOBS: Route(
        kwargs={"tenant_slug": "acme"},
        methods={
            "GET": Case(READERS),
            "POST": Case(
                members(viewer=403, engineer=201, admin=201, platform=201),
                body=lambda w: dict(BODY),
            ),
        },
    ),
    JOBS + "dry-run/": Route(
        kwargs={"tenant_slug": "acme"},
        methods={"POST": Case(WRITERS, body=lambda w: dict(BODY))},
    ),
    ONE: Route(
        methods={
            "GET": Case(READERS, kwargs=_bobs()),
            "DELETE": Case(
                members(viewer=403, engineer=202, admin=202, platform=202), kwargs=_bobs()
            ),
        },
    ),
    ONE + "stop/": Route(methods={"POST": Case(WRITERS, kwargs=_bobs())}),
    ONE + "logs/": Route(methods={"GET": Case(READERS, kwargs=_bobs())}),
}
