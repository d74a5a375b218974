"""The credential check a member must pass to be saved, and the lighter probe the health
task runs: the API server answers ``/version`` with these credentials, serves the custom
resources gangway needs (``access.required_crds``) and, by SelfSubjectAccessReviews,
allows every verb of ``access.rules``. A failure names exactly what failed."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from clusters.kube.errors import KubeError, TransientKubeError
from clusters.kube.forbidden import ACCESS_REVIEWS
from clusters.kube.gateway import Gateway
from clusters.members import access


@dataclass(frozen=True)
class Probe:
    """What one look at a member's API server saw."""

    kubernetes_version: str
    api_latency_ms: float
    # Operator name -> the custom resources of its group the server serves.
    operators: dict[str, list[str]] = field(default_factory=dict)


class CheckFailed(Exception):
    """A member's credentials or API server that gangway cannot work with, and why;
    ``seen`` is what the server answered when it did answer."""

    def __init__(self, message: str, *, seen: Probe | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.seen = seen


def probe(gateway: Gateway, *, server: str) -> Probe:
    """``/version`` (timed) and the operators' custom resources by API discovery, which
    every authenticated identity may read. Raises :class:`CheckFailed`."""
    started = time.monotonic()
    try:
        version = gateway.version()
    except KubeError as exc:
        raise CheckFailed(_unanswered(exc, server)) from exc
    latency = (time.monotonic() - started) * 1000
    return Probe(
        kubernetes_version=str(version.get("gitVersion") or ""),
        api_latency_ms=round(latency, 1),
        operators=_operators(gateway, server),
    )


def check(gateway: Gateway, *, server: str) -> Probe:
    """:func:`probe`, then refuse a member that lacks a custom resource gangway needs
    or denies a verb it uses. Raises :class:`CheckFailed` naming what is missing."""
    seen = probe(gateway, server=server)
    missing = missing_crds(seen)
    if missing:
        by_operator = ", ".join(
            f"{crd} ({access.OPERATORS[crd.partition('.')[2]]})" for crd in missing
        )
        raise CheckFailed(
            f"{server} does not serve the custom resources gangway needs: {by_operator}.",
            seen=seen,
        )
    rules = access.rules(queue_mode=settings.QUEUE_MODE, kai_enabled=settings.KAI_ENABLED)
    denied = _denied(gateway, server, rules)
    if denied:
        raise CheckFailed(
            f"The credentials may not do what gangway does on {server}: {'; '.join(denied)}. "
            "Grant the ClusterRole of `manage.py kubecluster rbac` (docs/fleet.md).",
            seen=seen,
        )
    return seen


def missing_crds(seen: Probe) -> list[str]:
    """The custom resources this deployment's modes need that ``seen`` did not find."""
    served = {crd for crds in seen.operators.values() for crd in crds}
    needed = access.required_crds(queue_mode=settings.QUEUE_MODE, kai_enabled=settings.KAI_ENABLED)
    return [crd for crd in needed if crd not in served]


def _unanswered(exc: KubeError, server: str) -> str:
    if exc.status == 401:
        return (
            f"{server} refused the credentials (401 Unauthorized): the token or client "
            "certificate is not valid there."
        )
    if exc.status == 403:
        return f"{server} does not let these credentials read /version (403 Forbidden)."
    if isinstance(exc, TransientKubeError) and not exc.status:
        reason = exc.message.partition("cannot reach the Kubernetes API ")[2] or exc.message
        return f"Cannot reach {server}: {reason.strip('()')}"
    return f"{server} did not answer /version: {exc.message}"


def _operators(gateway: Gateway, server: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for group, group_version in access.GROUP_VERSIONS.items():
        try:
            listing = gateway.get_path(f"/apis/{group_version}", what=f"discover {group_version}")
        except KubeError as exc:
            raise CheckFailed(_unanswered(exc, server)) from exc
        names = [
            f"{r['name']}.{group}"
            for r in (listing or {}).get("resources") or []
            if "/" not in str(r.get("name", ""))
        ]
        if names:
            found[access.OPERATORS[group]] = sorted(names)
    return found


def _denied(gateway: Gateway, server: str, rules: list[access.Rule]) -> list[str]:
    """Each resource with the verbs its review denied, as ``"nodes (list, watch)"``."""
    denied: list[str] = []
    for rule in rules:
        for resource in rule.resources:
            verbs = [
                verb
                for verb in rule.verbs
                if not _allowed(gateway, server, rule.group, resource, verb)
            ]
            if verbs:
                name = f"{resource}.{rule.group}" if rule.group else resource
                denied.append(f"{name} ({', '.join(verbs)})")
    return denied


def _allowed(gateway: Gateway, server: str, group: str, resource: str, verb: str) -> bool:
    plural, _, sub = resource.partition("/")
    attributes: dict[str, Any] = {"verb": verb, "group": group, "resource": plural}
    if sub:
        attributes["subresource"] = sub
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    try:
        answer = gateway.review(ACCESS_REVIEWS, body)
    except KubeError as exc:
        raise CheckFailed(f"{server} did not answer an access review: {exc.message}") from exc
    return bool((answer.get("status") or {}).get("allowed"))
