"""The only module that talks to Kubernetes (it alone imports the ``kubernetes`` client).

Everything above it deals in plain dicts and two exceptions (:mod:`clusters.kube.errors`).
Writes are server-side apply with one fixed field manager, so applying the same object
twice is a no-op; reads are LISTs by label selector across namespaces, one per kind, and
WATCHes from a LIST's resourceVersion (:mod:`clusters.kube.informer`). The client is
configured from ``settings.KUBECONFIG``, the pod's service account or a fleet member's
credentials (:mod:`clusters.kube.connection`).
"""

from __future__ import annotations

import builtins
import os
import threading
import time
from collections.abc import Callable, Generator
from typing import Any

import orjson
import urllib3
from django.conf import settings
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from clusters.kube import forbidden, notbefore
from clusters.kube.apiserver_proxies import ApiServerProxies
from clusters.kube.errors import (
    TERMINATING,
    KubeError,
    NamespaceMissing,
    PermanentKubeError,
    TransientKubeError,
    WatchExpired,
    retry_after,
    status_body,
    status_message,
    transport_error,
    watch_error,
)
from clusters.kube.resources import KINDS, Kind, kind_of
from clusters.kube.responses import (
    ProxiedResponse,
    UpgradeTarget,
    read_body,
    stream_lines,
)
from controlplane import metrics

__all__ = [
    "KINDS",
    "Gateway",
    "Kind",
    "KubeError",
    "NamespaceMissing",
    "PermanentKubeError",
    "ProxiedResponse",
    "TransientKubeError",
    "UpgradeTarget",
    "WatchExpired",
    "classify",
    "get_gateway",
    "kind_of",
    "own_gateway",
]

FIELD_MANAGER = "gangway"
# A request that is safe to repeat and failed transiently (not a 429) is sent again, at
# most this many times in all, after RETRY_BACKOFF_SECONDS doubling each time (0.7 s in
# all). See :meth:`Gateway._again`.
RETRY_ATTEMPTS = 4
RETRY_BACKOFF_SECONDS = 0.1
# A watch's read timeout is the server's own end of it (timeoutSeconds) plus this.
WATCH_READ_MARGIN_SECONDS = 15


def classify(exc: Exception, *, what: str) -> KubeError:
    """Map a client exception to a transient or permanent :class:`KubeError`."""
    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        message = f"{what}: {status} {status_message(exc)}"
        if status == 429:
            return TransientKubeError(message, status=status, retry_after=retry_after(exc))
        if status == 409 or status >= 500 or status == 0:
            return TransientKubeError(message, status=status, retry_after=retry_after(exc))
        if status == 403 and TERMINATING in message:
            return TransientKubeError(message, status=status)
        details = status_body(exc).get("details") or {}
        if status == 404 and isinstance(details, dict) and details.get("kind") == "namespaces":
            return NamespaceMissing(message, status=status)
        return PermanentKubeError(message, status=status)
    return transport_error(exc, what=what)


def _error_kind(error: KubeError) -> str:
    """The ``kind`` label of a failed request: transient or permanent, or its status
    class when it has one (a few values, whatever the server said)."""
    if error.status:
        return f"{error.status // 100}xx"
    return "transient" if isinstance(error, TransientKubeError) else "permanent"


def _selectors(label_selector: str, field_selector: str) -> list[tuple[str, str]]:
    """The query parameters of a list's or a watch's selectors (none for an empty one)."""
    given = (("labelSelector", label_selector), ("fieldSelector", field_selector))
    return [(name, value) for name, value in given if value]


class Gateway(ApiServerProxies):
    """A thin, typed wrapper over the client's REST transport for the kinds gangway writes."""

    def __init__(self, api_client: client.ApiClient, *, timeout: float) -> None:
        self._api = api_client
        self._timeout = timeout
        # Requests that may have changed something (every method but GET), sent or
        # refused: a reconcile pass tells a row's fold that did nothing by it.
        self.writes = 0
        self.member = ""  # the fleet member it reaches (what was applied is kept per member)

    def _send(
        self,
        method: str,
        path: str,
        *,
        what: str,
        scope: str,
        query: list[tuple[str, str]],
        headers: dict[str, str],
        body: Any = None,
        timeout: float | tuple[float, float],
    ) -> Any:
        """Send one request; the transport's raw response (not read), or the classified
        :class:`KubeError` (a 403 explained by access reviews: :mod:`.forbidden`). A path
        the API server throttled is not sent again before its Retry-After by any process
        (:mod:`.notbefore`); reads and writes (``scope``) are held apart, per API server."""
        held = f"{self._api.configuration.host}{path}"
        cluster = self.member or "home"
        metrics.GATEWAY_REQUESTS.labels(method, cluster).inc()
        left = notbefore.wait(scope, held)
        if left > 0:
            metrics.GATEWAY_ERRORS.labels(method, cluster, "throttled").inc()
            raise TransientKubeError(
                f"{what}: waiting {left:.1f} s more, as the API server asked",
                status=429,
                retry_after=left,
            )
        try:
            return self._api.call_api(
                path,
                method,
                query_params=query,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
        except Exception as exc:  # classified right here
            error = classify(exc, what=what)
            metrics.GATEWAY_ERRORS.labels(method, cluster, _error_kind(error)).inc()
            if isinstance(error, TransientKubeError) and error.retry_after:
                notbefore.hold(scope, held, error.retry_after)
            if error.status == 403 and isinstance(error, PermanentKubeError):
                why = forbidden.explain(
                    what,
                    error.message,
                    method=method,
                    path=path,
                    query=query,
                    content_type=headers.get("Content-Type", ""),
                    review=self.review,
                )
                error = PermanentKubeError(why, status=403)
            raise error from exc

    def review(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST one access review (what :mod:`clusters.kube.forbidden` and a member's
        credential check ask)."""
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        response = self._send(
            "POST",
            path,
            what=f"POST {path}",
            scope="read",
            query=[],
            headers=headers,
            body=body,
            timeout=self._timeout,
        )
        answer: dict[str, Any] = orjson.loads(read_body(response, what=f"POST {path}") or b"{}")
        return answer

    def _call(
        self,
        method: str,
        path: str,
        *,
        what: str,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        scope = "read" if method == "GET" else "write"
        if scope == "write":
            self.writes += 1
        response = self._send(
            method,
            path,
            what=what,
            scope=scope,
            query=query or [],
            headers={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            timeout=self._timeout,
        )
        data = read_body(response, what=what)
        # orjson: a LIST of thousands of pods is megabytes, several times faster to decode
        # than with the standard library's json.
        return orjson.loads(data) if data else {}

    def version(self) -> dict[str, Any]:
        """The server's ``/version`` (used by readiness checks)."""
        result: dict[str, Any] = self._call("GET", "/version", what="GET /version")
        return result

    def get_path(self, path: str, *, what: str) -> dict[str, Any] | None:
        """GET an arbitrary API path (e.g. Kueue's visibility API); ``None`` on 404."""
        try:
            result: dict[str, Any] = self._again("GET", path, what=what)
        except PermanentKubeError as exc:
            if exc.status == 404:
                return None
            raise
        return result

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or update ``obj`` by server-side apply (idempotent)."""
        meta = obj["metadata"]
        kind = kind_of(obj["apiVersion"], obj["kind"])
        path = kind.path(meta.get("namespace"), meta["name"])
        what = f"apply {obj['kind']} {meta.get('namespace', '')}/{meta['name']}".replace(" /", " ")
        result: dict[str, Any] = self._again(
            "PATCH",
            path,
            what=what,
            query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
            body=obj,
            content_type="application/apply-patch+yaml",
        )
        return result

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj`` only if it does not exist: a POST, so an existing object is a 409
        (transient: whoever retries looks at what is there now) and is never taken over."""
        meta = obj["metadata"]
        kind = kind_of(obj["apiVersion"], obj["kind"])
        what = f"create {obj['kind']} {meta.get('namespace', '')}/{meta['name']}".replace(" /", " ")
        result: dict[str, Any] = self._call(
            "POST",
            kind.path(meta.get("namespace")),
            what=what,
            query=[("fieldManager", FIELD_MANAGER)],
            body=obj,
        )
        return result

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """One object, or ``None`` when it does not exist."""
        try:
            result: dict[str, Any] = self._again(
                "GET",
                kind_of(api_version, kind).path(namespace, name),
                what=f"get {kind} {name}",
            )
        except PermanentKubeError as exc:
            if exc.status == 404:
                return None
            raise
        return result

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        namespace: str | None = None,
        page_size: int = 500,
    ) -> list[dict[str, Any]]:
        """Every object of a kind matching the selectors, across namespaces by default.

        Pages through ``limit``/``continue`` so that a large fleet is read in bounded
        responses; the result is one list.
        """
        items, _ = self.list_versioned(
            api_version,
            kind,
            label_selector=label_selector,
            field_selector=field_selector,
            namespace=namespace,
            page_size=page_size,
        )
        return items

    def list_if_served(self, api_version: str, kind: str) -> builtins.list[dict[str, Any]]:
        """:meth:`list`, or nothing when the API server does not serve the kind (a 404:
        e.g. ``resource.k8s.io/v1`` on a cluster without DRA)."""
        try:
            return self.list(api_version, kind)
        except PermanentKubeError as exc:
            if exc.status == 404:
                return []
            raise

    def list_versioned(
        self,
        api_version: str,
        kind: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        namespace: str | None = None,
        page_size: int = 500,
    ) -> tuple[builtins.list[dict[str, Any]], str]:
        """:meth:`list`, with the list's ``resourceVersion``: a watch from it sees every
        change since (the first page's, as the continue token keeps the pages to that
        snapshot on the API server)."""
        items: builtins.list[dict[str, Any]] = []
        path = kind_of(api_version, kind).path(namespace)
        token = ""
        version = ""
        while True:
            query = [("limit", str(page_size)), *_selectors(label_selector, field_selector)]
            if token:
                query.append(("continue", token))
            page = self._again("GET", path, what=f"list {kind}", query=query)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")
            token = meta.get("continue") or ""
            if not token:
                return items, version

    def current_version(self) -> str:
        """The API server's current ``resourceVersion`` (etcd's revision, shared by every
        kind), from the cheapest consistent read there is: a LIST of one namespace."""
        page = self._again(
            "GET", kind_of("v1", "Namespace").path(), what="list Namespace", query=[("limit", "1")]
        )
        return str((page.get("metadata") or {}).get("resourceVersion") or "")

    def watch(
        self,
        api_version: str,
        kind: str,
        *,
        resource_version: str,
        label_selector: str = "",
        field_selector: str = "",
        timeout_seconds: int = 300,
        opened: Callable[[], None] | None = None,
    ) -> Generator[dict[str, Any], None, None]:
        """A kind's watch events after ``resource_version`` (bookmarks asked for, so a
        quiet watch still learns how far it is) until the server ends it or the caller
        stops reading. An ``ERROR`` event raises: :class:`WatchExpired` for 410 (list
        again), else a :class:`KubeError`. ``opened``: called once the server answered."""
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
            *_selectors(label_selector, field_selector),
        ]
        what = f"watch {kind}"
        response = self._send(
            "GET",
            kind_of(api_version, kind).path(),
            what=what,
            scope="read",
            query=query,
            headers={"Accept": "application/json"},
            # Connecting is bounded as any request; reading waits out the server's own end
            # of the watch (and its bookmarks), with a margin.
            timeout=(self._timeout, timeout_seconds + WATCH_READ_MARGIN_SECONDS),
        )
        raw = response if hasattr(response, "stream") else response[0]
        if opened is not None:
            opened()
        finished = False
        try:
            for line in stream_lines(raw):
                event = orjson.loads(line)
                if event.get("type") == "ERROR":
                    raise watch_error(event.get("object") or {}, what=what)
                yield event
            finished = True
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise classify(exc, what=what) from exc
        finally:
            if not finished:
                raw.close()
            raw.release_conn()

    def _again(self, method: str, path: str, *, what: str, **kwargs: Any) -> Any:
        """:meth:`_call` for a repeatable request, asked again as :meth:`_repeat` says."""
        return self._repeat(lambda: self._call(method, path, what=what, **kwargs))

    def _repeat(self, request: Callable[[], Any]) -> Any:
        """Send ``request`` (safe to repeat) again after a transient answer, at most
        :data:`RETRY_ATTEMPTS` times, as client-go does: under a lossy API server, a pass of
        many LIST pages must still get through. A 429 goes up at once, so that the caller
        waits its Retry-After (task retry, next pass) instead of holding a worker asleep."""
        for attempt in range(RETRY_ATTEMPTS):
            try:
                return request()
            except TransientKubeError as exc:
                if exc.status == 429 or attempt == RETRY_ATTEMPTS - 1:
                    raise
                time.sleep(RETRY_BACKOFF_SECONDS * 2**attempt)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def pod_log(
        self,
        namespace: str,
        name: str,
        *,
        container: str = "",
        tail_lines: int | None = None,
        limit_bytes: int | None = None,
    ) -> str | None:
        """A pod's log (``pods/log``) as text; ``None`` when the pod does not exist. A
        container not started yet is a :class:`PermanentKubeError` (400, the server's words)."""
        query: list[tuple[str, str]] = []
        if container:
            query.append(("container", container))
        if tail_lines is not None:
            query.append(("tailLines", str(tail_lines)))
        if limit_bytes is not None:
            query.append(("limitBytes", str(limit_bytes)))
        path = kind_of("v1", "Pod").path(namespace, name) + "/log"
        what = f"log of pod {namespace}/{name}"

        def read() -> bytes:
            response = self._send(
                "GET",
                path,
                what=what,
                scope="read",
                query=query,
                headers={"Accept": "text/plain, */*"},
                timeout=self._timeout,
            )
            return read_body(response, what=what)

        # Asked again as any read is: a finished job's log is read once, before its pods
        # go, and one transient answer lost 3 of 8 jobs' output in the Kubernetes API
        # suite.
        try:
            data: bytes = self._repeat(read)
        except PermanentKubeError as exc:
            if exc.status == 404:
                return None
            raise
        return data.decode("utf-8", errors="replace")

    def merge_patch(
        self, api_version: str, kind: str, name: str, patch: dict[str, Any], namespace: str
    ) -> dict[str, Any]:
        """A JSON merge patch (used to flip ``spec.suspend``)."""
        result: dict[str, Any] = self._again(
            "PATCH",
            kind_of(api_version, kind).path(namespace, name),
            what=f"patch {kind} {namespace}/{name}",
            body=patch,
            content_type="application/merge-patch+json",
        )
        return result

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Background",
    ) -> bool:
        """Delete an object and its dependents; ``False`` when it was already gone."""
        try:
            self._again(
                "DELETE",
                kind_of(api_version, kind).path(namespace, name),
                what=f"delete {kind} {name}",
                body={
                    "kind": "DeleteOptions",
                    "apiVersion": "v1",
                    "propagationPolicy": propagation,
                },
            )
        except PermanentKubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True


_lock = threading.Lock()
_cached: tuple[tuple[str, int], Gateway] | None = None


def gateway_agent() -> str:
    """The ``User-Agent`` this process's gateway sends: it names the process."""
    return f"gangway-engine (pid {os.getpid()})"


def build_gateway(kubeconfig: str | dict[str, Any], *, source: str = "") -> Gateway:
    """A gateway with its own connections: to a kubeconfig file, a kubeconfig dict (a
    fleet member's) or, for "", the pod's service account; ``source`` names it in errors."""
    configuration = client.Configuration()
    try:
        if isinstance(kubeconfig, dict):
            config.load_kube_config_from_dict(kubeconfig, client_configuration=configuration)
        elif kubeconfig:
            config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        else:
            config.load_incluster_config(client_configuration=configuration)
    except Exception as exc:  # any failure here is a configuration problem
        source = source or (f"KUBECONFIG={kubeconfig}" if kubeconfig else "in-cluster credentials")
        raise PermanentKubeError(f"cannot load {source}: {exc}") from exc
    # Retries are ours (with backoff and Retry-After), not urllib3's silent ones.
    configuration.retries = False
    api_client = client.ApiClient(configuration)
    # The API server's audit log (and kubesim's fault history) can tell the engine's
    # processes apart: two of them writing one object at once is a race, not a retry.
    api_client.user_agent = gateway_agent()
    return Gateway(api_client, timeout=settings.KUBE_REQUEST_TIMEOUT_SECONDS)


def own_gateway() -> Gateway:
    """A gateway with its own connections, for a watch that holds one for minutes."""
    return build_gateway(settings.KUBECONFIG)


def get_gateway() -> Gateway:
    """The process's gateway, rebuilt when the KUBECONFIG setting changes (tests do that)
    and in a forked child, which must not share its parent's connections."""
    global _cached
    key = (settings.KUBECONFIG, os.getpid())
    with _lock:
        if _cached is None or _cached[0] != key:
            _cached = (key, build_gateway(key[0]))
        return _cached[1]
