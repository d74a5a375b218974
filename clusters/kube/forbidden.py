"""Explains a 403 from the API server in the words an operator acts on: which verbs
gangway's identity lacks on which resource and namespace, and what to grant.

The API server's own answer names one verb; an access review (SelfSubjectAccessReview)
asks it about every verb the request needs (a server-side apply of a new object is a
``patch`` and a ``create``), and a SelfSubjectReview says who gangway is. A 403 that RBAC
did not cause (admission, a terminating namespace) is left as the server worded it. Pure
apart from the ``review`` callable the gateway passes in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
APPLY = "application/apply-patch+yaml"
# Posts one review body to a path and answers the review the server returned.
Review = Callable[[str, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Asked:
    """What a request asks of RBAC: the verbs it needs and the resource they act on."""

    verbs: tuple[str, ...]
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str

    def review(self, verb: str) -> dict[str, Any]:
        """The SelfSubjectAccessReview asking whether ``verb`` is allowed."""
        attrs = {
            "verb": verb,
            "group": self.group,
            "resource": self.resource,
            "subresource": self.subresource,
            "namespace": self.namespace,
            "name": self.name,
        }
        return {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {k: v for k, v in attrs.items() if v}},
        }


def asked(method: str, path: str, query: list[tuple[str, str]], content_type: str) -> Asked | None:
    """The verbs and resource of a request to a resource path (``None`` for any other)."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        return None
    namespace = ""
    if rest[:1] == ["namespaces"] and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    watching = dict(query).get("watch") in ("true", "1")
    verbs: tuple[str, ...]
    if method == "GET":
        verbs = ("get",) if name else (("watch",) if watching else ("list",))
    elif method == "PATCH":
        # An apply creates the object when it is absent: the API server checks both.
        verbs = ("patch", "create") if content_type == APPLY else ("patch",)
    elif method == "DELETE":
        verbs = ("delete",) if name else ("deletecollection",)
    else:
        verbs = ({"POST": "create", "PUT": "update"}.get(method, method.lower()),)
    return Asked(verbs, group, rest[0], subresource, namespace, name)


def _who(review: Review) -> tuple[str, str]:
    """How to call gangway's identity in a sentence, and its user name."""
    answer = review(WHOAMI, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    user = str(((answer.get("status") or {}).get("userInfo") or {}).get("username") or "")
    if user.startswith("system:serviceaccount:") and user.count(":") == 3:
        _, _, ns, name = user.split(":")
        return f"gangway's service account {ns}/{name}", user
    return (f'gangway (user "{user}")' if user else "gangway"), user


def explain(
    what: str,
    message: str,
    *,
    method: str,
    path: str,
    query: list[tuple[str, str]],
    content_type: str,
    review: Review,
) -> str:
    """``message`` (a 403's, ``<what>: 403 ...``) with what gangway may not do and what to
    grant in front of the server's words; unchanged when the reviews find nothing denied
    or cannot be asked (``review`` raises)."""
    request = asked(method, path, query, content_type)
    if request is None or path.startswith((ACCESS_REVIEWS, WHOAMI)):
        return message
    try:
        denied = [
            verb
            for verb in request.verbs
            if not (review(ACCESS_REVIEWS, request.review(verb)).get("status") or {}).get("allowed")
        ]
        if not denied:
            return message
        who, user = _who(review)
    except Exception:  # noqa: BLE001 - an explanation must never hide the error it explains
        return message
    resource = request.resource + (f"/{request.subresource}" if request.subresource else "")
    where = f"in {request.namespace}" if request.namespace else "across the cluster"
    group = f'API group "{request.group}"' if request.group else "the core API group"
    grant = ", ".join(denied)
    whom = f" {user}" if user else ""
    said = message[len(what) + 2 :] if message.startswith(f"{what}: ") else message
    return (
        f"{what}: {who} may not {' or '.join(denied)} {resource} {where}: grant{whom} "
        f"{grant} on {resource} in {group} (a rule of gangway's ClusterRole, "
        f"deploy/base/rbac.yaml). The API server said: {said}"
    )
