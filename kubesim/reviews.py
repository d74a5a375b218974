"""The self-reviews a client asks about itself: SelfSubjectAccessReview ("may I?",
``kubectl auth can-i``), SelfSubjectRulesReview (``auth can-i --list``) and
SelfSubjectReview (``auth whoami``), answered from the RBAC objects kubesim stores
(``rbac.py``). Each is create-only and stored nowhere, as on the API server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.rbac import Attributes, User, decide, granted

if TYPE_CHECKING:
    from kubesim.cluster import Cluster
    from kubesim.resources import ResourceType

ACCESS = "selfsubjectaccessreviews.authorization.k8s.io"
RULES = "selfsubjectrulesreviews.authorization.k8s.io"
WHOAMI = "selfsubjectreviews.authentication.k8s.io"
REVIEW_KEYS = frozenset({ACCESS, RULES, WHOAMI})


def review(cluster: Cluster, user: User, rt: ResourceType, method: str, body: Any) -> Any:
    """Answer a POST of one review kind (201 and the review with its status)."""
    if method != "POST":
        raise errors.method_not_allowed()
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request must be a JSON/YAML object")
    if body.get("kind") not in (None, rt.kind):
        raise errors.bad_request(
            f"the object provided is unrecognized (must be of type {rt.kind}): "
            f"the body is a {body['kind']}"
        )
    spec: dict[str, Any] = body["spec"] if isinstance(body.get("spec"), dict) else {}
    answer: dict[str, Any] = {
        "kind": rt.kind,
        "apiVersion": rt.api_version(),
        "metadata": {"creationTimestamp": None},
    }
    with cluster.lock:
        if rt.key == WHOAMI:
            answer["status"] = {"userInfo": user.info()}
        elif rt.key == ACCESS:
            answer["spec"] = spec
            answer["status"] = _access(cluster, user, spec)
        else:
            answer["spec"] = spec
            answer["status"] = _rules(cluster, user, str(spec.get("namespace") or ""))
    return answer


def _access(cluster: Cluster, user: User, spec: dict[str, Any]) -> dict[str, Any]:
    res, non = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if (res is None) == (non is None):
        raise errors.invalid(
            "SelfSubjectAccessReview",
            "authorization.k8s.io",
            "",
            [
                errors.Cause(
                    "spec.resourceAttributes",
                    "FieldValueInvalid",
                    'Invalid value: "null": exactly one of nonResourceAttributes or '
                    "resourceAttributes must be specified",
                )
            ],
        )
    if isinstance(res, dict):
        attrs = Attributes(
            verb=str(res.get("verb") or ""),
            path="",
            resource_request=True,
            group=str(res.get("group") or ""),
            resource=str(res.get("resource") or ""),
            subresource=str(res.get("subresource") or ""),
            namespace=str(res.get("namespace") or ""),
            name=str(res.get("name") or ""),
        )
    elif isinstance(non, dict):
        attrs = Attributes(verb=str(non.get("verb") or ""), path=str(non.get("path") or ""))
    else:
        raise errors.bad_request("spec.resourceAttributes must be an object")
    if user.privileged:
        return {"allowed": True}
    allowed, reason = decide(cluster, user, attrs)
    return {"allowed": allowed, "reason": reason} if reason else {"allowed": allowed}


def _rules(cluster: Cluster, user: User, namespace: str) -> dict[str, Any]:
    resource_rules: list[dict[str, Any]] = []
    non_resource_rules: list[dict[str, Any]] = []
    for _, rule in granted(cluster, user, namespace):
        if rule.get("nonResourceURLs"):
            non_resource_rules.append(
                {"verbs": list(rule.get("verbs") or []), "nonResourceURLs": rule["nonResourceURLs"]}
            )
        if rule.get("resources"):
            entry = {
                "verbs": list(rule.get("verbs") or []),
                "apiGroups": list(rule.get("apiGroups") or []),
                "resources": list(rule["resources"]),
            }
            if rule.get("resourceNames"):
                entry["resourceNames"] = list(rule["resourceNames"])
            resource_rules.append(entry)
    return {
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": False,
    }
