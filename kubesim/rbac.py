"""Who calls, and what RBAC lets them do: bearer tokens mapped to users, the request's
authorization attributes, and the RBAC authorizer over the Roles, ClusterRoles and
bindings kubesim stores (aggregated ClusterRoles included).

Members of ``system:masters`` pass without a check, as kube-apiserver's privileged-group
authorizer lets them; everyone else is checked on every request and refused with the API
server's 403. The token table is a simulator knob (the fleet's ``users:``; see README).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from kubesim import errors

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

RBAC = "rbac.authorization.k8s.io"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"


@dataclass(frozen=True)
class User:
    """An authenticated identity: its name and groups, as the authenticator yields them."""

    name: str
    groups: tuple[str, ...]
    uid: str = ""

    @property
    def privileged(self) -> bool:
        """In ``system:masters``: every request allowed, RBAC not consulted."""
        return MASTERS in self.groups

    def info(self) -> dict[str, Any]:
        """The ``userInfo`` of a SelfSubjectReview."""
        out: dict[str, Any] = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        return out


def service_account(namespace: str, name: str) -> User:
    """The identity of a service account's token."""
    groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED)
    return User(f"system:serviceaccount:{namespace}:{name}", groups)


ADMIN = User("kubernetes-admin", (MASTERS, AUTHENTICATED))
# Tokens every kubesim knows: its admin (the kubeconfig's default user) and gangway's own
# service accounts, as deploy/base/serviceaccounts.yaml names them (the worker's, the web's).
DEFAULT_TOKENS: dict[str, tuple[str, User]] = {
    "kubesim": ("kubesim", ADMIN),
    "gangway": ("gangway", service_account("gangway-system", "gangway")),
    "gangway-web": ("gangway-web", service_account("gangway-system", "gangway-web")),
}


def token_table(fleet: dict[str, Any]) -> dict[str, tuple[str, User]]:
    """Token -> (kubeconfig user name, identity): the defaults and the fleet's ``users:``
    (``{name, token, username, groups}``; ``system:authenticated`` is always added)."""
    table = dict(DEFAULT_TOKENS)
    for entry in fleet.get("users") or []:
        for key in ("name", "token", "username"):
            if not entry.get(key):
                raise ValueError(f"fleet user {entry!r} lacks {key!r}")
        groups = tuple(str(g) for g in entry.get("groups") or ())
        if AUTHENTICATED not in groups:
            groups += (AUTHENTICATED,)
        table[str(entry["token"])] = (str(entry["name"]), User(str(entry["username"]), groups))
    return table


def authenticate(cluster: ClusterView, headers: Any) -> User:
    """The caller of a request: its ``Authorization: Bearer`` token's user, then who it
    impersonates (``Impersonate-User``/``-Group``, what ``kubectl --as`` sends), as the API
    server authenticates. A bearer token the table does not know is 401 Unauthorized; a
    request without one is kubesim's admin: client-go sends no credentials over plain
    HTTP, and clients written before identities existed keep working."""
    authorization = headers.get("Authorization")
    user = ADMIN
    if authorization and authorization[:7].lower() == "bearer ":
        known = cluster.tokens.get(authorization[7:].strip())
        if known is None:
            # A token that authenticates nobody is refused before any authorizer runs.
            raise errors.ApiError(401, "Unauthorized", "Unauthorized")
        user = known[1]
    target = headers.get("Impersonate-User")
    return user if not target else _impersonate(cluster, user, target, headers)


def _impersonate(cluster: ClusterView, user: User, target: str, headers: Any) -> User:
    """``user`` acting as ``target`` (with the requested groups), if RBAC lets it."""
    groups = tuple(headers.get_all("Impersonate-Group") or ())
    if target.startswith("system:serviceaccount:") and target.count(":") == 3:
        _, _, ns, name = target.split(":")
        asked = [Attributes("impersonate", "", True, "", "serviceaccounts", "", ns, name)]
        groups += service_account(ns, name).groups
    else:
        asked = [Attributes("impersonate", "", True, "", "users", "", "", target)]
    asked += [Attributes("impersonate", "", True, "", "groups", "", "", g) for g in groups]
    for attrs in asked:
        if not user.privileged:
            with cluster.lock:
                allowed, _ = decide(cluster, user, attrs)
            if not allowed:
                raise _forbidden(user, attrs)
    if AUTHENTICATED not in groups:
        groups += (AUTHENTICATED,)
    return User(target, tuple(dict.fromkeys(groups)))


@dataclass(frozen=True)
class Attributes:
    """What a request asks, as the API server's RequestInfo resolves it."""

    verb: str
    path: str
    resource_request: bool = False
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""


_CONNECT = frozenset({"exec", "attach", "portforward"})
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def attributes(method: str, path: str, params: dict[str, str]) -> Attributes:
    """The authorization attributes of one request (``path`` without its query)."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        return Attributes(verb=method.lower(), path=path)
    watching = rest[0] == "watch"
    if watching:
        rest = rest[1:]
    ns = ""
    if rest[:1] == ["namespaces"] and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        ns, rest = rest[1], rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if resource == "namespaces" and name:
        ns = name
    if method == "GET":
        watching = watching or (not name and params.get("watch") in ("true", "1"))
        verb = "watch" if watching else ("get" if name else "list")
    elif method == "DELETE" and not name:
        verb = "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return Attributes(verb, path, True, group, resource, sub, ns, name)


def _has(values: list[str], want: str) -> bool:
    return "*" in values or want in values


def rule_allows(attrs: Attributes, rule: dict[str, Any]) -> bool:
    """One PolicyRule against a request (RBAC's RuleAllows)."""
    if not _has(rule.get("verbs") or [], attrs.verb):
        return False
    if not attrs.resource_request:
        for url in rule.get("nonResourceURLs") or []:
            if url in ("*", attrs.path) or (url.endswith("*") and attrs.path.startswith(url[:-1])):
                return True
        return False
    if not _has(rule.get("apiGroups") or [], attrs.group):
        return False
    resources = rule.get("resources") or []
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    if not (
        "*" in resources
        or combined in resources
        or (attrs.subresource and f"*/{attrs.subresource}" in resources)
        or f"{attrs.resource}/*" in resources
    ):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _subject_matches(subject: dict[str, Any], user: User, binding_ns: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user.name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return user.name == f"system:serviceaccount:{ns}:{name}"
    return False


def _describe_subject(subject: dict[str, Any], binding_ns: str) -> str:
    if subject.get("kind") == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return f'ServiceAccount "{subject.get("name")}/{ns}"'
    return f'{subject.get("kind")} "{subject.get("name")}"'


def _labels_match(labels: dict[str, str], selector: dict[str, Any]) -> bool:
    wanted = selector.get("matchLabels") or {}
    return bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())


def _cluster_role_rules(cluster: ClusterView, name: str) -> list[dict[str, Any]]:
    """A ClusterRole's rules; an aggregated one's are those of the roles it selects (the
    aggregation controller's work, done when asked)."""
    role = cluster.store.get(f"clusterroles.{RBAC}", "", name)
    if role is None:
        return []
    selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
    if not selectors:
        return list(role.get("rules") or [])
    rules: list[dict[str, Any]] = []
    for other in cluster.store.iter(f"clusterroles.{RBAC}"):
        labels = other["metadata"].get("labels") or {}
        if other is not role and any(_labels_match(labels, s) for s in selectors):
            rules.extend(other.get("rules") or [])
    return rules


def _role_rules(cluster: ClusterView, ref: dict[str, Any], ns: str) -> list[dict[str, Any]]:
    if ref.get("kind") == "ClusterRole":
        return _cluster_role_rules(cluster, str(ref.get("name")))
    role = cluster.store.get(f"roles.{RBAC}", ns, str(ref.get("name")))
    return list(role.get("rules") or []) if role is not None else []


def granted(
    cluster: ClusterView, user: User, namespace: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every rule granted to ``user`` in ``namespace`` (cluster-wide ones too), each with
    the binding that grants it as RBAC describes it."""
    for crb in cluster.store.iter(f"clusterrolebindings.{RBAC}"):
        ref = crb.get("roleRef") or {}
        for subject in crb.get("subjects") or []:
            if _subject_matches(subject, user, ""):
                source = (
                    f'ClusterRoleBinding "{crb["metadata"]["name"]}" of ClusterRole '
                    f'"{ref.get("name")}" to {_describe_subject(subject, "")}'
                )
                for rule in _cluster_role_rules(cluster, str(ref.get("name"))):
                    yield source, rule
                break
    if not namespace:
        return
    for rb in cluster.store.iter(f"rolebindings.{RBAC}", namespace):
        ref = rb.get("roleRef") or {}
        for subject in rb.get("subjects") or []:
            if _subject_matches(subject, user, namespace):
                source = (
                    f'RoleBinding "{rb["metadata"]["name"]}/{namespace}" of {ref.get("kind")} '
                    f'"{ref.get("name")}" to {_describe_subject(subject, namespace)}'
                )
                for rule in _role_rules(cluster, ref, namespace):
                    yield source, rule
                break


def decide(cluster: ClusterView, user: User, attrs: Attributes) -> tuple[bool, str]:
    """Whether RBAC allows the request, and why (``RBAC: allowed by ...``, else empty)."""
    for source, rule in granted(cluster, user, attrs.namespace):
        if rule_allows(attrs, rule):
            return True, f"RBAC: allowed by {source}"
    return False, ""


def forbidden_message(user: User, attrs: Attributes) -> str:
    """The API server's words for a refused request."""
    if not attrs.resource_request:
        return f'User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    return (
        f'User "{user.name}" cannot {attrs.verb} resource "{resource}" '
        f'in API group "{attrs.group}" {where}'
    )


def authorize(
    cluster: ClusterView, user: User, method: str, path: str, params: dict[str, str]
) -> None:
    """Refuse a request RBAC does not allow with 403 Forbidden, as the API server words it
    (privileged users pass at once)."""
    if user.privileged:
        return
    attrs = attributes(method, path, params)
    checks = [attrs]
    if attrs.verb == "get" and attrs.resource == "pods" and attrs.subresource in _CONNECT:
        # A WebSocket GET of exec, attach or portforward also needs ``create``
        # (AuthorizePodWebsocketUpgradeCreatePermission, on by default since 1.31).
        checks.append(replace(attrs, verb="create"))
    for check in checks:
        with cluster.lock:
            allowed, _ = decide(cluster, user, check)
        if not allowed:
            raise _forbidden(user, check)


def _forbidden(user: User, attrs: Attributes) -> errors.ApiError:
    """The API server's 403 for a refused request."""
    why = forbidden_message(user, attrs)
    if not attrs.resource_request:
        return errors.ApiError(403, "Forbidden", f"forbidden: {why}", {})
    ref = errors.resource_ref(attrs.resource, attrs.group)
    head = f'{ref} "{attrs.name}"' if attrs.name else ref
    pairs = (("name", attrs.name), ("group", attrs.group), ("kind", attrs.resource))
    details = {k: v for k, v in pairs if v}
    return errors.ApiError(403, "Forbidden", f"{head} is forbidden: {why}", details)


def _cluster_role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "rules": rules,
    }


def _binding(name: str, role: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": RBAC, "kind": "Group", "name": group}],
    }


# The part of kube-apiserver's bootstrap policy an identity needs to be a client at all:
# discovery, version and health, and asking about itself (the access reviews).
BOOTSTRAP: list[dict[str, Any]] = [
    _cluster_role(
        "cluster-admin",
        [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]},
        ],
    ),
    _cluster_role(
        "system:discovery",
        [
            {
                "nonResourceURLs": [
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
                "verbs": ["get"],
            }
        ],
    ),
    _cluster_role(
        "system:public-info-viewer",
        [
            {
                "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                "verbs": ["get"],
            }
        ],
    ),
    _cluster_role(
        "system:basic-user",
        [
            {
                "apiGroups": ["authorization.k8s.io"],
                "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                "verbs": ["create"],
            },
            {
                "apiGroups": ["authentication.k8s.io"],
                "resources": ["selfsubjectreviews"],
                "verbs": ["create"],
            },
        ],
    ),
    _binding("cluster-admin", "cluster-admin", MASTERS),
    _binding("system:discovery", "system:discovery", AUTHENTICATED),
    _binding("system:public-info-viewer", "system:public-info-viewer", AUTHENTICATED),
    _binding("system:basic-user", "system:basic-user", AUTHENTICATED),
]


def install_policy(cluster: ClusterView) -> None:
    """Create the bootstrap ClusterRoles and bindings that are missing (as kube-apiserver
    reconciles its bootstrap policy at start)."""
    for obj in BOOTSTRAP:
        key = f"{obj['kind'].lower()}s.{RBAC}"
        if cluster.store.get(key, "", obj["metadata"]["name"]) is None:
            copied = {**obj, "metadata": dict(obj["metadata"])}
            cluster.create_object(cluster.rt(key), copied, admit=False)
