"""Inter-pod affinity and anti-affinity, as kube-scheduler's InterPodAffinity plugin has them.

A pod's ``affinity.podAffinity`` / ``podAntiAffinity`` terms name other pods (a label
selector, in the pod's namespace unless ``namespaces`` or an empty ``namespaceSelector``
widens it) and a ``topologyKey``: the domain is the set of nodes sharing that label's value.
Required affinity: the node must lie in a domain that already runs a matching pod — unless
no pod anywhere matches and the pod matches its own terms (the first of a group, which may
go anywhere). Required anti-affinity: no matching pod in the node's domain. Preferred terms
add (or, for anti-affinity, subtract) their weight to nodes in such domains. Existing pods'
anti-affinity towards the incoming pod (the plugin's symmetric check) is not simulated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
AFFINITY_MISFIT = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_MISFIT = "node(s) didn't match pod anti-affinity rules"


@dataclass(frozen=True, eq=False)  # keyed by identity: the selector is a dict
class Term:
    """One affinity term: which pods, in which namespaces (None: all), over which domain."""

    selector: Mapping[str, Any]
    namespaces: frozenset[str] | None
    topology_key: str
    weight: int = 0


@dataclass(frozen=True)
class PodAffinity:
    """A pending pod's inter-pod affinity terms, with its own namespace and labels."""

    namespace: str
    labels: Mapping[str, str]
    required: tuple[Term, ...] = ()
    anti_required: tuple[Term, ...] = ()
    preferred: tuple[Term, ...] = ()
    anti_preferred: tuple[Term, ...] = ()

    @property
    def scored(self) -> bool:
        """Whether preferred terms weigh on where the pod goes."""
        return bool(self.preferred or self.anti_preferred)


# A placed pod as the plugin sees it: namespace, labels, node.
Placed = tuple[str, Mapping[str, str], str]


def of(pod: Mapping[str, Any]) -> PodAffinity | None:
    """The pod's inter-pod affinity, or None when it has none."""
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    pa, anti = affinity.get("podAffinity") or {}, affinity.get("podAntiAffinity") or {}
    if not pa and not anti:
        return None
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")

    def terms(block: Mapping[str, Any], key: str) -> tuple[Term, ...]:
        out = []
        for raw in block.get(key) or []:
            weight = 0
            if key == PREFERRED:
                weight = int(raw.get("weight") or 0)
                raw = raw.get("podAffinityTerm") or {}
            names: frozenset[str] | None = frozenset(raw.get("namespaces") or ()) or None
            if names is None and raw.get("namespaceSelector") != {}:
                names = frozenset({namespace})  # {} selects every namespace
            out.append(
                Term(
                    selector=raw.get("labelSelector") or {},
                    namespaces=names,
                    topology_key=str(raw.get("topologyKey") or ""),
                    weight=weight,
                )
            )
        return tuple(out)

    return PodAffinity(
        namespace=namespace,
        labels=dict(meta.get("labels") or {}),
        required=terms(pa, REQUIRED),
        anti_required=terms(anti, REQUIRED),
        preferred=terms(pa, PREFERRED),
        anti_preferred=terms(anti, PREFERRED),
    )


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector against labels (an empty selector matches every pod)."""
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _matches(term: Term, namespace: str, labels: Mapping[str, str]) -> bool:
    in_scope = term.namespaces is None or namespace in term.namespaces
    return in_scope and selector_matches(term.selector, labels)


class Domains:
    """For one scheduling attempt: each term's domains (topology values) that run a pod it
    matches, computed once over the placed pods and then asked per node."""

    def __init__(
        self,
        affinity: PodAffinity,
        placed: Iterable[Placed],
        node_labels: Mapping[str, Mapping[str, str]],
    ) -> None:
        self.affinity = affinity
        terms = (
            affinity.required
            + affinity.anti_required
            + affinity.preferred
            + affinity.anti_preferred
        )
        self.found: dict[Term, set[str]] = {t: set() for t in terms}
        self.any_match: dict[Term, bool] = dict.fromkeys(terms, False)
        for namespace, labels, node in placed:
            where = node_labels.get(node) or {}
            for term in terms:
                if _matches(term, namespace, labels):
                    self.any_match[term] = True
                    if term.topology_key in where:
                        self.found[term].add(where[term.topology_key])
        # The first of a group: nothing matches the required terms anywhere yet, and the
        # pod matches them itself, so any node will do for them.
        self.first_of_group = (
            bool(affinity.required)
            and not any(self.any_match[t] for t in affinity.required)
            and all(_matches(t, affinity.namespace, affinity.labels) for t in affinity.required)
        )

    def _in(self, term: Term, node: Mapping[str, str]) -> bool:
        value = node.get(term.topology_key)
        return value is not None and value in self.found[term]

    def why_not(self, node: Mapping[str, str]) -> list[str]:
        """kube-scheduler's reasons the node breaks a required term ([]: it does not)."""
        why = []
        if not self.first_of_group and not all(self._in(t, node) for t in self.affinity.required):
            why.append(AFFINITY_MISFIT)
        if any(self._in(t, node) for t in self.affinity.anti_required):
            why.append(ANTI_AFFINITY_MISFIT)
        return why

    def score(self, node: Mapping[str, str]) -> int:
        """The preferred terms' weights the node earns (anti-affinity's count against)."""
        gain = sum(t.weight for t in self.affinity.preferred if self._in(t, node))
        return gain - sum(t.weight for t in self.affinity.anti_preferred if self._in(t, node))
