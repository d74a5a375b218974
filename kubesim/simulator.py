"""What the HTTP server needs of the simulator that runs it, as a protocol: the server
types against it, so that it does not import :mod:`kubesim.sim`, which starts it."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kubesim.cluster import Cluster
    from kubesim.faults import Faults
    from kubesim.serviceproxy import ProxyLog


class Simulator(Protocol):
    """The simulator as the server sees it (:class:`kubesim.sim.KubeSim` is one)."""

    cluster: Cluster
    faults: Faults
    proxy_log: ProxyLog
    port: int
    watch_breaks: int
    watch_bookmark_interval: float

    @property
    def stopping(self) -> threading.Event:
        """Set once the simulator is stopping."""
        ...

    def watch_opened(self) -> AbstractContextManager[None]:
        """Count one open watch stream for as long as the block runs."""
        ...

    def admin(self, method: str, path: str, body: Any) -> dict[str, Any]:
        """The admin API under ``/_kubesim``."""
        ...
