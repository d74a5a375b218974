"""Ray Serve on a real head (``--real-ray``): what the RayService controller asks of a
RayCluster that runs real Ray (``realray.py``) instead of the simulated Serve.

As KubeRay does, the config is PUT to the head's dashboard and the statuses read back. The
calls run in one thread per head, never under the cluster's lock (a real dashboard may take
seconds to answer); the controller reads the last answer and is woken when it changes.
Every Ray node here shares one loopback host, so the config's ``http_options`` get the
head's own Serve port and ``proxy_location`` ``HeadOnly`` (kubesim/README.md, *Real Ray*).
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

# KubeRay polls Serve every 2 s (its requeue); a PUT may take a while on a fresh head.
POLL_SECONDS = 2.0
PUT_TIMEOUT = 60.0
GET_TIMEOUT = 10.0
Key = tuple[str, str]


@dataclass
class HeadServe:
    """One real head's Serve, as last seen: the config wanted and applied, the answer."""

    uid: str
    wanted: str | None = None
    applied: str | None = None
    error: str = ""
    statuses: dict[str, dict[str, Any]] | None = None
    proxy_healthy: bool = False
    wake: threading.Event = field(default_factory=threading.Event)


def fold(details: Any) -> tuple[dict[str, dict[str, Any]] | None, bool]:
    """``ServeInstanceDetails`` as the controller reads it: each application's status,
    message and deployments (status, message), and whether a proxy is healthy."""
    if not isinstance(details, dict):
        return None, False
    apps: dict[str, dict[str, Any]] = {}
    for name, app in (details.get("applications") or {}).items():
        deps = {
            d: {"status": str(ds.get("status") or ""), "message": str(ds.get("message") or "")}
            for d, ds in (app.get("deployments") or {}).items()
        }
        apps[name] = {
            "status": str(app.get("status") or ""),
            "message": str(app.get("message") or ""),
            "deployments": deps,
        }
    proxies = (details.get("proxies") or {}).values()
    return apps, any(p.get("status") == "HEALTHY" for p in proxies)


class RealServe:
    """The Serve API of the real heads, called from a thread per head."""

    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.heads: dict[Key, HeadServe] = {}

    def _head(self, ns: str, name: str) -> HeadServe | None:
        """The head's record (made, and its thread started, on first use); None when the
        cluster has no real head."""
        real = self.cluster.realray
        slot = real.slot(ns, name) if real is not None else None
        if slot is None:
            return None
        found = self.heads.get((ns, name))
        if found is None or found.uid != slot.uid:
            if found is not None:
                found.uid = ""  # its thread ends
                found.wake.set()
            found = self.heads[(ns, name)] = HeadServe(slot.uid)
            threading.Thread(
                target=self._run, args=(ns, name, found), name=f"realserve-{name}", daemon=True
            ).start()
        return found

    def is_real(self, ns: str, name: str) -> bool:
        """Whether RayCluster ``ns/name`` runs real Ray (and so real Serve)."""
        real = self.cluster.realray
        return real is not None and real.claim(ns, name)

    def apply(self, ns: str, name: str, doc: dict[str, Any]) -> tuple[bool, str]:
        """Ask for ``doc`` on the head; (applied already, the last PUT's error)."""
        head = self._head(ns, name)
        if head is None:
            return False, "no real head"
        wanted = json.dumps(self._loopback(ns, name, doc), sort_keys=True)
        if head.wanted != wanted:
            head.wanted = wanted
            head.error = ""
            head.wake.set()
        return head.applied == wanted, head.error

    def statuses(self, ns: str, name: str) -> dict[str, dict[str, Any]] | None:
        """The applications as last read from the head (as ``RayServe.statuses``)."""
        head = self._head(ns, name)
        return head.statuses if head is not None else None

    def proxy_healthy(self, ns: str, name: str) -> bool:
        """Whether the head's Serve proxy was last read healthy."""
        head = self.heads.get((ns, name))
        return head is not None and head.proxy_healthy and self.is_real(ns, name)

    def _loopback(self, ns: str, name: str, doc: dict[str, Any]) -> dict[str, Any]:
        real = self.cluster.realray
        slot = real.slot(ns, name) if real is not None else None
        out = dict(doc)
        if slot is not None:
            http = dict(out.get("http_options") or {})
            out["http_options"] = {**http, "host": "127.0.0.1", "port": slot.ports["serve"]}
            out["proxy_location"] = "HeadOnly"
        return out

    # -- the thread ---------------------------------------------------------------------

    def _base(self, ns: str, name: str, head: HeadServe) -> str | None:
        with self.cluster.lock:
            real = self.cluster.realray
            slot = real.slot(ns, name) if real is not None else None
            if slot is None or slot.uid != head.uid:
                return None
            return f"http://127.0.0.1:{slot.ports['dashboard']}/api/serve/applications/"

    def _run(self, ns: str, name: str, head: HeadServe) -> None:
        while True:
            url = self._base(ns, name, head)
            if url is None:
                return
            changed = False
            wanted = head.wanted
            if wanted is not None and wanted != head.applied:
                error = _put(url, wanted)
                if error is None:
                    head.applied, head.error, changed = wanted, "", True
                elif error != head.error:
                    head.error, changed = error, True
            statuses, healthy = fold(_get(url))
            if statuses is not None and (statuses, healthy) != (head.statuses, head.proxy_healthy):
                head.statuses, head.proxy_healthy, changed = statuses, healthy, True
            if changed:
                with self.cluster.lock:
                    # A timer due now: the ticker's next pass reconciles the RayService.
                    owner = self.cluster.rayservice.owners.get((ns, name))
                    if owner is not None:
                        self.cluster.rayservice.wake_at(self.cluster.clock.time(), ns, owner)
            head.wake.wait(POLL_SECONDS)
            head.wake.clear()


def _put(url: str, body: str) -> str | None:
    req = urllib.request.Request(url, data=body.encode(), method="PUT")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=PUT_TIMEOUT):
            return None
    except urllib.error.HTTPError as exc:
        return exc.read().decode(errors="replace") or str(exc)
    except (OSError, ValueError) as exc:
        return str(exc)


def _get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=GET_TIMEOUT) as resp:
            return json.loads(resp.read() or b"null")
    except (OSError, ValueError):
        return None
