"""What a refused request asked of RBAC (pure): the verbs the API server checks for each
request shape, and a 403 that RBAC did not cause left as the server worded it."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.kube.forbidden import APPLY, Asked, asked, explain

RAYJOB = "/apis/ray.io/v1/namespaces/gw-x/rayjobs/train"


@pytest.mark.parametrize(
    ("method", "path", "query", "ctype", "verbs"),
    [
        ("PATCH", RAYJOB, [("fieldManager", "gangway")], APPLY, ("patch", "create")),
        ("PATCH", RAYJOB, [], "application/merge-patch+json", ("patch",)),
        ("GET", RAYJOB, [], "", ("get",)),
        ("GET", "/apis/ray.io/v1/rayjobs", [("watch", "true")], "", ("watch",)),
        ("GET", "/apis/ray.io/v1/rayjobs", [], "", ("list",)),
        ("DELETE", RAYJOB, [], "", ("delete",)),
        ("POST", "/api/v1/namespaces", [], "", ("create",)),
    ],
)
def test_the_verbs_a_request_needs(
    method: str, path: str, query: list[tuple[str, str]], ctype: str, verbs: tuple[str, ...]
) -> None:
    request = asked(method, path, query, ctype)
    assert request is not None and request.verbs == verbs


def test_a_subresource_and_its_namespace() -> None:
    assert asked("GET", "/api/v1/namespaces/gw-x/pods/p/log", [], "") == Asked(
        ("get",), "", "pods", "log", "gw-x", "p"
    )
    assert asked("GET", "/version", [], "") is None


def test_a_403_rbac_allowed_is_left_as_the_server_said_it() -> None:
    asked_paths: list[str] = []

    def review(path: str, body: dict[str, Any]) -> dict[str, Any]:
        asked_paths.append(path)
        return {"status": {"allowed": True}}

    message = 'create Pod gw-x/p: 403 pods "p" is forbidden: violates PodSecurity'
    said = explain(
        "create Pod gw-x/p",
        message,
        method="POST",
        path="/api/v1/namespaces/gw-x/pods",
        query=[],
        content_type="",
        review=review,
    )
    assert said == message
    assert asked_paths == ["/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"]
