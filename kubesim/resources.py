"""The resource registry: which kinds kubesim serves, and the discovery documents for them.

Built-in kinds are declared here; custom kinds are read from the CRD YAML files in
``kubesim/crds`` so that their names, scopes, versions and schemas come from the real
definitions rather than from a copy typed by hand.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

import yaml

CRD_DIR = os.path.join(os.path.dirname(__file__), "crds")

_ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass
class ResourceType:
    """One served resource (e.g. ``pods`` or ``rayclusters.ray.io``)."""

    group: str
    versions: list[str]
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    status_subresource: bool = False
    verbs: list[str] = field(default_factory=lambda: list(_ALL_VERBS))
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    printer_columns: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    crd: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        """Storage key: ``plural`` for the core group, ``plural.group`` otherwise."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def storage_version(self) -> str:
        """The version objects are written back with when no other is asked for."""
        return self.versions[0]

    def api_version(self, version: str | None = None) -> str:
        """``apiVersion`` string for a version of this resource."""
        v = version or self.storage_version
        return f"{self.group}/{v}" if self.group else v

    @property
    def is_custom(self) -> bool:
        """True for kinds defined by a CRD."""
        return self.crd is not None

    @property
    def has_generation(self) -> bool:
        """Whether objects carry ``metadata.generation`` (custom kinds, spec-bearing built-ins)."""
        return self.is_custom or self.key in _GENERATION_KEYS

    @property
    def list_kind(self) -> str:
        """Kind of the list wrapper."""
        return f"{self.kind}List"


_GENERATION_KEYS = frozenset(
    {
        "pods",
        "jobs.batch",
        "networkpolicies.networking.k8s.io",
        "customresourcedefinitions.apiextensions.k8s.io",
        "deviceclasses.resource.k8s.io",
        "resourceslices.resource.k8s.io",
        "resourceclaims.resource.k8s.io",
        "resourceclaimtemplates.resource.k8s.io",
    }
)


def _builtin(
    group: str,
    version: str,
    plural: str,
    kind: str,
    namespaced: bool = True,
    short: list[str] | None = None,
    status: bool = False,
    verbs: list[str] | None = None,
) -> ResourceType:
    return ResourceType(
        group=group,
        versions=[version],
        plural=plural,
        singular=kind.lower(),
        kind=kind,
        namespaced=namespaced,
        short_names=short or [],
        status_subresource=status,
        verbs=verbs or list(_ALL_VERBS),
        categories=["all"] if plural in ("pods", "services", "jobs") else [],
    )


BUILTINS: list[ResourceType] = [
    _builtin(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        ["ns"],
        status=True,
        verbs=["create", "delete", "get", "list", "patch", "update", "watch"],
    ),
    _builtin("", "v1", "nodes", "Node", False, ["no"], status=True),
    _builtin("", "v1", "pods", "Pod", True, ["po"], status=True),
    _builtin("", "v1", "services", "Service", True, ["svc"], status=True),
    _builtin("", "v1", "events", "Event", True, ["ev"]),
    _builtin("", "v1", "resourcequotas", "ResourceQuota", True, ["quota"], status=True),
    _builtin("", "v1", "limitranges", "LimitRange", True, ["limits"]),
    _builtin("", "v1", "serviceaccounts", "ServiceAccount", True, ["sa"]),
    _builtin("", "v1", "configmaps", "ConfigMap", True, ["cm"]),
    _builtin("", "v1", "secrets", "Secret", True),
    _builtin("", "v1", "endpoints", "Endpoints", True, ["ep"]),
    _builtin("batch", "v1", "jobs", "Job", True, status=True),
    # PodTemplates: what a ProvisioningRequest's podSets reference (see autoscaler.py).
    _builtin("", "v1", "podtemplates", "PodTemplate", True),
    _builtin("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, ["netpol"]),
    _builtin("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    _builtin("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    _builtin("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    _builtin("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    # Pod priorities (KAI reads a workload's from the PriorityClass its label names).
    _builtin("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ["pc"]),
    # Dynamic Resource Allocation (kubesim/dra/): devices, their classes, and claims on them.
    _builtin("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
    _builtin("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
    _builtin("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, status=True),
    _builtin("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True),
    # The self-reviews (reviews.py): create-only, stored nowhere.
    _builtin(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        False,
        verbs=["create"],
    ),
    _builtin(
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        False,
        verbs=["create"],
    ),
    _builtin(
        "authentication.k8s.io",
        "v1",
        "selfsubjectreviews",
        "SelfSubjectReview",
        False,
        verbs=["create"],
    ),
    _builtin(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        ["crd", "crds"],
        status=True,
        verbs=["get", "list"],
    ),
]


def _parse_crds(paths: list[str]) -> dict[str, Any]:
    """Parse the CRD files, through a JSON cache in the temp directory: the YAML takes
    seconds to parse (even with the C loader) and JSON a tenth of that."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as fh:
            digest.update(fh.read())
    cache = os.path.join(tempfile.gettempdir(), f"kubesim-crds-{digest.hexdigest()[:16]}.json")
    try:
        with open(cache, encoding="utf-8") as fh:
            data: dict[str, Any] = json.load(fh)
        if sorted(data) == sorted(paths):
            return data
    except (OSError, ValueError):
        pass
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = {}
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            data[path] = yaml.load(fh, Loader=loader)
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(cache), prefix=".kubesim-crds-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, cache)
    except OSError:
        pass  # a cache we cannot write only costs time
    return data


def load_crd(path: str, crd: dict[str, Any] | None = None) -> ResourceType:
    """Build a ResourceType from one CRD (parsed already, or read from its YAML file)."""
    if crd is None:
        with open(path, encoding="utf-8") as fh:
            crd = yaml.safe_load(fh)
    assert crd is not None
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec["versions"] if v.get("served", True)]
    # The storage version goes first: it is the preferred version in discovery.
    served.sort(key=lambda v: not v.get("storage", False))
    return ResourceType(
        group=spec["group"],
        versions=[v["name"] for v in served],
        plural=names["plural"],
        singular=names.get("singular", names["kind"].lower()),
        kind=names["kind"],
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        short_names=list(names.get("shortNames") or []),
        categories=list(names.get("categories") or []),
        status_subresource=any("status" in (v.get("subresources") or {}) for v in served),
        schemas={v["name"]: v["schema"]["openAPIV3Schema"] for v in served if v.get("schema")},
        printer_columns={v["name"]: v.get("additionalPrinterColumns") or [] for v in served},
        crd=crd,
    )


_SHARED: Registry | None = None


class Registry:
    """All served resources, looked up by group/version/plural or by kind."""

    def __init__(self, crd_dir: str = CRD_DIR) -> None:
        self.types: list[ResourceType] = list(BUILTINS)
        paths = sorted(glob.glob(os.path.join(crd_dir, "*.yaml")))
        for path, crd in _parse_crds(paths).items():
            self.types.append(load_crd(path, crd))
        self._by_gvr: dict[tuple[str, str, str], ResourceType] = {}
        self._by_key: dict[str, ResourceType] = {}
        self._by_gvk: dict[tuple[str, str], ResourceType] = {}
        for rt in self.types:
            self._by_key[rt.key] = rt
            for v in rt.versions:
                self._by_gvr[(rt.group, v, rt.plural)] = rt
                self._by_gvk[(rt.api_version(v), rt.kind)] = rt

    @classmethod
    def shared(cls) -> Registry:
        """One registry per process: parsing the CRDs takes a second, so do it once."""
        global _SHARED
        if _SHARED is None:
            _SHARED = cls()
        return _SHARED

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        """Resource served at ``/apis/<group>/<version>/<plural>`` (group '' = core)."""
        return self._by_gvr.get((group, version, plural))

    def by_key(self, key: str) -> ResourceType:
        """Resource by storage key (``pods``, ``rayclusters.ray.io``)."""
        return self._by_key[key]

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        """Resource for an object's ``apiVersion`` and ``kind``."""
        return self._by_gvk.get((api_version, kind))

    def groups(self) -> dict[str, list[str]]:
        """Named groups (not core) and their versions, preferred first."""
        out: dict[str, list[str]] = {}
        for rt in self.types:
            if not rt.group:
                continue
            versions = out.setdefault(rt.group, [])
            for v in rt.versions:
                if v not in versions:
                    versions.append(v)
        return out

    def group_versions(self) -> list[tuple[str, str]]:
        """Every (group, version) pair served, core first."""
        out = [("", "v1")]
        for g, versions in self.groups().items():
            out.extend((g, v) for v in versions)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        """Resources served under one group/version."""
        return [rt for rt in self.types if rt.group == group and version in rt.versions]

    # -- discovery documents ------------------------------------------------------------

    def api_versions(self, server_address: str) -> dict[str, Any]:
        """``GET /api`` (legacy ``APIVersions``)."""
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
            ],
        }

    def api_group(self, group: str) -> dict[str, Any]:
        """``APIGroup`` document for one named group."""
        versions = self.groups()[group]
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": group,
            "versions": gvs,
            "preferredVersion": gvs[0],
        }

    def api_group_list(self) -> dict[str, Any]:
        """``GET /apis`` (legacy ``APIGroupList``)."""
        groups = []
        for group in self.groups():
            doc = self.api_group(group)
            doc.pop("kind")
            doc.pop("apiVersion")
            groups.append(doc)
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        """``APIResourceList`` for one group/version, or None when not served."""
        types = self.in_group_version(group, version)
        if not types and not (group == "" and version == "v1"):
            return None
        resources: list[dict[str, Any]] = []
        for rt in types:
            entry: dict[str, Any] = {
                "name": rt.plural,
                "singularName": rt.singular,
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": rt.verbs,
            }
            if rt.short_names:
                entry["shortNames"] = rt.short_names
            if rt.categories:
                entry["categories"] = rt.categories
            resources.append(entry)
            if rt.status_subresource:
                resources.append(
                    {
                        "name": f"{rt.plural}/status",
                        "singularName": "",
                        "namespaced": rt.namespaced,
                        "kind": rt.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            if rt.key == "pods":
                # Served by ``podlogs.py``: the API server lists it with the one verb.
                resources.append(
                    {
                        "name": "pods/log",
                        "singularName": "",
                        "namespaced": True,
                        "kind": "Pod",
                        "verbs": ["get"],
                    }
                )
        gv = f"{group}/{version}" if group else version
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": gv,
            "resources": resources,
        }
