"""The API server's proxies: one HTTP request to a service or to a node's port, and
where a WebSocket through it goes, each with the kubeconfig's credentials. The bytes go
past the client's REST layer straight to its connection pool, streamed.
"""

from __future__ import annotations

from typing import Any

import urllib3

from clusters.kube import notbefore
from clusters.kube.errors import TransientKubeError, retry_after_seconds, transport_error
from clusters.kube.responses import ProxiedResponse, UpgradeTarget, proxy_path, tls_context


class ApiServerProxies:
    """The proxied requests of :class:`~clusters.kube.gateway.Gateway`, which holds the
    client (``_api``) and the request timeout (``_timeout``) they use."""

    _api: Any
    _timeout: float

    def service_proxy(
        self,
        method: str,
        namespace: str,
        service: str,
        port: str,
        path: str,
        *,
        query: str = "",
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        timeout: float | None = None,
    ) -> ProxiedResponse:
        """One HTTP request to a service through the API server's service proxy,
        streaming; ``path`` and ``query`` go as given (already URL-encoded). Any status is
        an answer the caller relays; only getting none raises :class:`TransientKubeError`."""
        url = f"{self._api.configuration.host}{proxy_path(namespace, service, port, path, query)}"
        sent = self._with_credentials(headers)
        try:
            response = self._api.rest_client.pool_manager.request(
                method,
                url,
                body=body,
                headers=sent,
                preload_content=False,
                redirect=False,
                retries=False,
                timeout=urllib3.Timeout(connect=self._timeout, read=timeout or self._timeout),
            )
        except Exception as exc:  # classified right here
            raise transport_error(
                exc, what=f"proxy to service {namespace}/{service}:{port}"
            ) from exc
        return ProxiedResponse(response)

    def node_proxy_get(self, node: str, port: int, path: str, *, limit: int) -> tuple[int, bytes]:
        """GET ``path`` on a port of ``node`` through the API server's node proxy
        (``nodes/{node}:{port}/proxy``): the status and at most ``limit`` bytes of the body.
        Getting no answer raises :class:`TransientKubeError`; so does asking again before
        a 429's ``Retry-After`` has passed (the engine's own read, held as the gateway's
        reads are: :mod:`.notbefore`)."""
        url = f"{self._api.configuration.host}/api/v1/nodes/{node}:{port}/proxy/{path.lstrip('/')}"
        what = f"proxy to node {node}:{port}"
        left = notbefore.wait("read", url)
        if left > 0:
            raise TransientKubeError(
                f"{what}: waiting {left:.1f} s more, as the API server asked",
                status=429,
                retry_after=left,
            )
        try:
            response = self._api.rest_client.pool_manager.request(
                "GET",
                url,
                headers=self._with_credentials({"Accept": "text/plain, */*"}),
                preload_content=False,
                redirect=False,
                retries=False,
                timeout=urllib3.Timeout(connect=self._timeout, read=self._timeout),
            )
            try:
                if response.status == 429:
                    wait = retry_after_seconds(response.headers.get("Retry-After"))
                    if wait:
                        notbefore.hold("read", url, wait)
                return response.status, response.read(limit)
            finally:
                response.release_conn()
        except Exception as exc:  # classified right here
            raise transport_error(exc, what=what) from exc

    def service_proxy_upgrade(
        self,
        namespace: str,
        service: str,
        port: str,
        path: str,
        *,
        query: str = "",
        headers: dict[str, str] | None = None,
    ) -> UpgradeTarget:
        """Where a WebSocket to a service goes through the API server's service proxy,
        which carries upgrades to the backend (``path`` and ``query`` as for
        :meth:`service_proxy`)."""
        return self.upgrade(proxy_path(namespace, service, port, path, query), headers)

    def upgrade(self, path: str, headers: dict[str, str] | None = None) -> UpgradeTarget:
        """Where a WebSocket to the API server's ``path`` (query included) goes, with the
        credentials (``pods/portforward``, a service proxy). The connection is the
        caller's to open: it lasts as long as the conversation, as no pooled one should."""
        configuration = self._api.configuration
        scheme, _, host = str(configuration.host).partition("://")
        url = f"{'wss' if scheme == 'https' else 'ws'}://{host}{path}"
        tls = tls_context(configuration) if scheme == "https" else None
        return UpgradeTarget(url, self._with_credentials(headers), tls)

    def _with_credentials(self, headers: dict[str, str] | None) -> dict[str, str]:
        """``headers`` and the API server's credentials (the kubeconfig's bearer token)."""
        sent = dict(headers or {})
        self._api.update_params_for_auth(sent, [], ["BearerToken"])
        return sent
