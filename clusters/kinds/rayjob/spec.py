"""The job part of a job request: what runs, as asked (the shape is a ClusterSpec)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_ENTRYPOINT = 4096
# KubeRay appends "-" and five random characters to a RayJob's name for its RayCluster,
# which must stay within 53: a RayJob name has at most 47 (KubeRay refuses longer ones).
MAX_JOB_NAME = 47
MAX_DEADLINE_SECONDS = 7 * 24 * 3600
MAX_TTL_AFTER_FINISHED = 7 * 24 * 3600


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """A job's own fields of the create body: ``host`` is the API's ``cluster``, the name
    of one of the requester's ready dev clusters to run on (``None``: a cluster of its
    own, shaped by the request's ClusterSpec); ``name`` the job's (``None``: generated)."""

    entrypoint: str
    runtime_env: Any = field(default_factory=dict)  # checked by validate_runtime_env
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int = 0
    host: str | None = None
    name: str | None = None
    # What a job with a ``host`` asked of the pods (a job of its own carries these in its
    # ClusterSpec): a host's pods already run, so only the host's own image is accepted,
    # and no env or container_gpus.
    image: str = ""
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    container_gpus: bool = False

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> JobSpec:
        """From a parsed create body or form (``cluster`` names the host)."""
        return cls(
            entrypoint=str(data.get("entrypoint") or ""),
            runtime_env=data.get("runtime_env") or {},
            active_deadline_seconds=data.get("active_deadline_seconds") or None,
            ttl_seconds_after_finished=int(data.get("ttl_seconds_after_finished") or 0),
            host=data.get("cluster") or None,
            name=data.get("name") or None,
            image=str(data.get("image") or ""),
            env=data.get("env") or {},
            container_gpus=bool(data.get("container_gpus")),
        )
