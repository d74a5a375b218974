"""Pods that will not start by waiting: an image that cannot be pulled, a container that
keeps crashing or is killed for memory. Read from the container statuses the kubelet
writes, and said in plain words with what the owner can do about it; the reconciler
shows it as the cluster's reason and tells the owner once (the note ``pods_failing``)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from clusters.admission import counts_in_words as words

PULL_FAILURES = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName"})
# The prefix every trouble reason starts with, so a fold can tell a new trouble apart.
PREFIX = "cannot start: "


def _role(pod: dict[str, Any]) -> str:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return "head" if labels.get("ray.io/node-type") == "head" else "worker"


def _who(role: str, n: int) -> str:
    if role == "head":
        return "the head"
    return words.count(n, "worker")


def _memory_limit(pod: dict[str, Any], container: str) -> str:
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") == container:
            return str(((c.get("resources") or {}).get("limits") or {}).get("memory") or "")
    return ""


def _crashes(cs: dict[str, Any]) -> int:
    """How many times a container ended: its restarts, and the end it waits after."""
    waiting = ((cs.get("state") or {}).get("waiting")) or {}
    return int(cs.get("restartCount") or 0) + (waiting.get("reason") == "CrashLoopBackOff")


def pod_trouble(pods: list[dict[str, Any]]) -> str:
    """Why some of ``pods`` cannot start, in plain words ('' when nothing is wrong)."""
    pulls: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    crashes: dict[tuple[str, str, bool], list[tuple[dict[str, Any], dict[str, Any]]]]
    crashes = defaultdict(list)
    for pod in pods:
        role = _role(pod)
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = ((cs.get("state") or {}).get("waiting")) or {}
            last = ((cs.get("lastState") or {}).get("terminated")) or {}
            if waiting.get("reason") in PULL_FAILURES:
                pulls[(role, str(cs.get("image") or ""))].append(pod)
            elif waiting.get("reason") == "CrashLoopBackOff" or (
                last and int(cs.get("restartCount") or 0) > 0 and not cs.get("ready")
            ):
                # Between two crashes a restarted container runs, not ready yet: still
                # the same trouble (else the reason, and its note, would flap).
                crashes[
                    (role, str(cs.get("name") or ""), last.get("reason") == "OOMKilled")
                ].append((pod, cs))
    said = []
    for (role, image), stuck in sorted(pulls.items()):
        who = _who(role, len(stuck))
        said.append(
            f"{who} cannot pull the image {image} (not in the registry, or not allowed to "
            "pull it): check the image name and tag, or pick another image"
        )
    for (role, container, oom), looping in sorted(crashes.items()):
        who = _who(role, len(looping))
        keeps = "keeps" if role == "head" or len(looping) == 1 else "keep"
        crashed = max(_crashes(cs) for _, cs in looping)
        times = words.count(crashed, "time")
        if oom:
            limit = _memory_limit(looping[0][0], container)
            within = f" of its {limit} memory limit" if limit else ""
            said.append(
                f"{who} {keeps} being killed for running out of memory (OOMKilled{within}, "
                f"{times}): ask for more memory or use less"
            )
        else:
            code = ((looping[0][1].get("lastState") or {}).get("terminated") or {}).get(
                "exitCode", "?"
            )
            said.append(
                f"{who} {keeps} crashing (exit code {code}, {times}, CrashLoopBackOff): see its log"
            )
    return (PREFIX + "; ".join(said))[:500] if said else ""
