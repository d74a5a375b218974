"""MultiKueue's connection to a worker cluster: the kubeconfig a MultiKueueCluster names
(checked as Kueue checks it) and a small JSON client for the worker's API over HTTP.

Only what the manager needs: get, list by label, create, merge patch and delete of
Workloads and jobs.
A failure to connect is a :class:`WorkerUnreachable` with a message in the shape of the
Go client's error, which Kueue puts in the MultiKueueCluster's ``Active`` condition.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import yaml

from kubesim.store import Obj

# How long one request to a worker may take before it counts as unreachable.
REQUEST_TIMEOUT = 3.0


class BadKubeConfig(Exception):
    """The kubeconfig cannot be used: ``reason`` is Kueue's condition reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class WorkerUnreachable(Exception):
    """The worker did not answer (or refused the credentials)."""


def parse_kubeconfig(text: str) -> tuple[str, str]:
    """(server URL, bearer token or "") of the current context of kubeconfig ``text``,
    refused as Kueue's ``validateKubeconfig`` refuses it (reason ``InsecureKubeConfig``):
    unparsable, a ``tokenFile``, ``insecure-skip-tls-verify``, a CA file path, no server,
    basic auth, exec or auth-provider plugins."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BadKubeConfig(
            "InsecureKubeConfig", f"failed to parse kubeconfig(apiconfig): {exc}"
        ) from exc
    if not isinstance(config, dict):
        raise BadKubeConfig(
            "InsecureKubeConfig", "failed to parse kubeconfig(apiconfig): not a kubeconfig"
        )
    users = {u.get("name"): u.get("user") or {} for u in config.get("users") or []}
    clusters = {c.get("name"): c.get("cluster") or {} for c in config.get("clusters") or []}
    _refuse_insecure(users, clusters)
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
    current = config.get("current-context") or ""
    context = contexts.get(current)
    if context is None:
        raise BadKubeConfig(
            "InsecureKubeConfig", f'invalid configuration: context "{current}" does not exist'
        )
    cluster = clusters.get(context.get("cluster"))
    if cluster is None:
        raise BadKubeConfig(
            "InsecureKubeConfig",
            f'invalid configuration: cluster "{context.get("cluster")}" does not exist',
        )
    user = users.get(context.get("user"), {})
    if user.get("username") or user.get("password"):
        raise BadKubeConfig("InsecureKubeConfig", "basic auth is not allowed")
    if user.get("exec"):
        raise BadKubeConfig("InsecureKubeConfig", "exec plugins are not allowed")
    if user.get("auth-provider"):
        raise BadKubeConfig("InsecureKubeConfig", "auth providers are not allowed")
    return str(cluster["server"]).rstrip("/"), str(user.get("token") or "")


def _refuse_insecure(users: dict[Any, Any], clusters: dict[Any, Any]) -> None:
    """Kueue's refusals of any user or cluster of the kubeconfig."""
    for user in users.values():
        if user.get("tokenFile"):
            raise BadKubeConfig("InsecureKubeConfig", "tokenFile is not allowed")
    for name, cluster in clusters.items():
        if cluster.get("insecure-skip-tls-verify"):
            raise BadKubeConfig(
                "InsecureKubeConfig",
                f"insecure TLS verification is not allowed for cluster {name}",
            )
        if cluster.get("certificate-authority"):
            raise BadKubeConfig(
                "InsecureKubeConfig",
                "certificate-authority file paths are not allowed, use "
                f"certificate-authority-data for cluster {name}",
            )
        if not cluster.get("server"):
            raise BadKubeConfig("InsecureKubeConfig", f"server URL is required for cluster {name}")


class WorkerClient:
    """JSON requests to one worker's API server."""

    def __init__(self, server: str, token: str) -> None:
        self.server = server
        self.token = token

    def _request(
        self, method: str, path: str, body: Obj | None = None, content_type: str = ""
    ) -> Obj | None:
        """The decoded answer; None for 404; WorkerUnreachable when the worker cannot be
        reached or refuses; other API errors as RuntimeError."""
        url = self.server + path
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type or "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT) as resp:
                answer: Obj = json.loads(resp.read() or b"{}")
                return answer
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            text = exc.read().decode(errors="replace")
            try:
                message = json.loads(text).get("message", text)
            except ValueError:
                message = text
            if exc.code in (401, 403):
                raise WorkerUnreachable(message or "Unauthorized") from exc
            if exc.code == 409 and method == "POST":
                return None  # already there: a create is idempotent for the caller
            raise RuntimeError(f"{method} {path}: {exc.code} {message}") from exc
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            why = getattr(exc, "reason", exc)
            host = urllib.parse.urlsplit(url).netloc
            verb = method.capitalize()
            raise WorkerUnreachable(f'{verb} "{url}": dial tcp {host}: {why}') from exc

    def probe(self) -> None:
        """Kueue's connection check: it watches the worker's Workloads; here one list."""
        self._request("GET", "/apis/kueue.x-k8s.io/v1beta2/workloads?limit=1")

    def get(self, path: str) -> Obj | None:
        """The object at ``path`` (None: absent)."""
        return self._request("GET", path)

    def list(self, path: str, selector: str) -> list[Obj]:
        """The items at collection ``path`` matching label ``selector``."""
        query = urllib.parse.urlencode({"labelSelector": selector})
        answer = self._request("GET", f"{path}?{query}") or {}
        items: list[Obj] = answer.get("items") or []
        return items

    def create(self, path: str, body: Obj) -> None:
        """Create ``body`` in collection ``path`` (already there: nothing)."""
        self._request("POST", path, body)

    def merge_patch(self, path: str, patch: Obj) -> None:
        """JSON merge patch of the object at ``path`` (absent: nothing; a conflict with a
        ``metadata.resourceVersion`` in ``patch`` is a RuntimeError)."""
        self._request("PATCH", path, patch, "application/merge-patch+json")

    def delete(self, path: str) -> None:
        """Delete the object at ``path`` in the background (absent: nothing)."""
        self._request("DELETE", path, {"propagationPolicy": "Background"})


def collection(api_version: str, plural: str, namespace: str) -> str:
    """The API path of a namespaced collection (``apps/v1`` style group versions)."""
    root = "/api" if "/" not in api_version else "/apis"
    return f"{root}/{api_version}/namespaces/{namespace}/{plural}"


def to_json(obj: Any) -> Any:
    """A deep copy safe to send (JSON round trip)."""
    return json.loads(json.dumps(obj))
