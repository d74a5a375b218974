"""Access table of the jobs API (submit, list, detail, stop, delete, logs, dry-run).
See ``tests/access/matrix.py`` for the vocabulary.

Routes on one job build their target in the ``kwargs`` builder: bob's queued dev job in
acme (a queued job can be read, stopped and deleted, and its logs say it has none yet,
so no Kubernetes API is needed).
"""

from __future__ import annotations

from typing import Any

from clusters.models import Job
from tests.access.kind_routes import READERS, WRITERS, bobs_queued, collection_routes
from tests.access.matrix import Case, Route, members

JOBS = "api/v1/tenants/{tenant_slug}/jobs/"
ONE = JOBS + "{name}/"
BODY = {"entrypoint": "python train.py", "flavor": "l4", "workers": 1}


def _bobs(name: str = "bob-job") -> Any:
    return bobs_queued(
        workload="job",
        name=name,
        details=lambda row: Job.objects.create(request=row, entrypoint="python train.py"),
    )


ROUTES = {
    **collection_routes(JOBS, BODY),
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
    ONE + "checkpoint/": Route(
        methods={"POST": Case(WRITERS, kwargs=_bobs(), body=lambda w: {"uri": "s3://b/c"})}
    ),
}
