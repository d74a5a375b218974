"""The built-in queue: gangway's own admission pass decides on the database."""

from __future__ import annotations

from clusters.queue.admission_pass import run_admission_pass
from clusters.queue.interface import PassResult, QueueBackend
from clusters.rows import enqueue


class BuiltinQueue(QueueBackend):
    """Requests wait as rows; the admission pass (:mod:`clusters.queue.admission_pass`)
    admits whole gangs and writes every waiting row's standing."""

    name = "builtin"

    def request_queued(self, cluster_id: int) -> None:
        enqueue.admission_pass()

    def admission_pass(self) -> PassResult:
        return run_admission_pass()
