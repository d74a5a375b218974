"""The rules a Ray cluster request must pass before it is accepted: its shape (dev or
prod, workers and autoscaling, GPU fractions, TTL) and what its pods run (the image,
``env``, containers that see the pod's GPUs). Pure: the API, the dashboard, the dry-run
and the services call it, so a rule is written once.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from clusters.domain.environment import validate_env
from clusters.domain.shapes import (
    DEV_MAX_WORKERS,
    FlavorSpec,
    as_flavor_spec,
    replica_bounds,
    ttl_hours_message,
    ttl_hours_range,
    validate_name,
)


def validate_request(
    *,
    tenant: Any,
    flavor: Any,
    kind: str,
    workers: int,
    min_workers: int | None,
    max_workers: int | None,
    gpu_fraction: Decimal | None,
    ttl_hours: int | None,
    name: str | None,
    image: str | None,
    kai_enabled: bool,
    image_allowlist: Sequence[str] | None = None,
    kueue: bool = False,
    env: Any = None,
    container_gpus: bool = False,
    container_profile: str | None = None,
) -> None:
    """Refuse a cluster request whose shape is wrong or can never fit, saying why.

    Pure: it reads only its arguments (``tenant`` for its TTL policy, ``flavor`` as a
    row or :class:`FlavorSpec`) and raises ``ValidationError`` with one message per
    offending field. Per-user caps and quotas need queries and live with admission.
    ``image_allowlist`` defaults to ``settings.RAY_IMAGE_ALLOWLIST``; an empty ``image``
    means the default image. ``kueue`` (Kueue admits clusters) refuses autoscaling: Kueue
    admits a RayCluster at one fixed size and its webhook refuses the in-tree autoscaler
    (unless the cluster is an elastic job, an alpha feature gangway does not use).
    ``env`` is checked by :func:`clusters.domain.environment.validate_env` (every fault under
    ``env``); ``container_gpus`` by :func:`container_gpus_refusal`, with
    ``container_profile`` defaulting to ``settings.CONTAINER_GPUS_SECCOMP_PROFILE``.
    """
    spec = as_flavor_spec(flavor)
    errors: dict[str, str] = {}
    if name:
        try:
            validate_name(name)
        except ValidationError as exc:
            errors.update({k: v[0] for k, v in exc.message_dict.items()})
    if kind not in ("dev", "prod"):
        errors["kind"] = "Choose 'dev' or 'prod'."
    elif kind == "dev":
        _check_dev(errors, spec, workers, min_workers, max_workers)
    else:
        _check_prod(errors, spec, workers, min_workers, max_workers)
        if kueue and "max_workers" not in errors and "min_workers" not in errors:
            _check_kueue_fixed_size(errors, workers, min_workers, max_workers)
    if gpu_fraction is not None:
        _check_fraction(errors, spec, kind, gpu_fraction, kai_enabled)
    low, high = ttl_hours_range(tenant)
    if ttl_hours is not None and not low <= ttl_hours <= high:
        errors["ttl_hours"] = ttl_hours_message(tenant)
    faults = _payload_faults(
        tenant=tenant,
        gpu_fraction=gpu_fraction,
        image=image,
        image_allowlist=image_allowlist,
        env=env,
        container_gpus=container_gpus,
        container_profile=container_profile,
        mig_profile=spec.mig_profile,
    )
    if errors or faults:
        raise ValidationError({**{k: [v] for k, v in errors.items()}, **faults})


def _payload_faults(
    *,
    tenant: Any,
    gpu_fraction: Decimal | None,
    image: str | None,
    image_allowlist: Sequence[str] | None,
    env: Any,
    container_gpus: bool,
    container_profile: str | None,
    mig_profile: str = "",
) -> dict[str, list[str]]:
    """The faults of what the pods run: the image, ``env`` and ``container_gpus``."""
    faults: dict[str, list[str]] = {}
    if image:
        allowed = list(settings.RAY_IMAGE_ALLOWLIST if image_allowlist is None else image_allowlist)
        if image not in allowed:
            faults["image"] = [image_refusal(image, allowed)]
    _, env_faults = validate_env(env)
    if env_faults:
        faults["env"] = env_faults
    if container_gpus:
        profile = (
            settings.CONTAINER_GPUS_SECCOMP_PROFILE
            if container_profile is None
            else container_profile
        )
        why = container_gpus_refusal(
            gpu_fraction=gpu_fraction,
            pod_security=str(getattr(tenant, "pod_security", "baseline")),
            seccomp_profile=profile,
            mig_profile=mig_profile,
        )
        if why:
            faults["container_gpus"] = [why]
    return faults


def image_refusal(image: str, allowed: Sequence[str]) -> str:
    """Why ``image`` may not be used: it is not on the allow-list (which is named)."""
    return (
        f"Image {image!r} is not allowed: it is not on the allow-list (RAY_IMAGE_ALLOWLIST); "
        f"use one of: {', '.join(allowed)}."
    )


def container_gpus_refusal(
    *, gpu_fraction: Decimal | None, pod_security: str, seccomp_profile: str, mig_profile: str = ""
) -> str:
    """Why a request may not opt in to containers that see the pod's GPUs, or ``""``.

    The opt-in gives each GPU worker an init container that writes a CDI spec of the
    pod's own GPUs, and lets the Ray container run rootless podman: that needs the
    SETUID and SETGID capabilities, privilege escalation (newuidmap is setuid) and a
    seccomp profile that allows user namespaces and mounts, installed on the nodes by
    the platform (docs/containers.md). Pod Security ``restricted`` forbids the first
    two; a fractional worker has no GPU of its own to describe, and the spec describes
    whole GPUs (from their UUIDs), not a MIG partition (``mig_profile``).
    """
    if gpu_fraction is not None:
        return (
            "Containers with GPUs need whole GPUs: a fractional worker shares a device "
            "that no CDI spec of its own can describe."
        )
    if mig_profile:
        return (
            f"Containers with GPUs need whole GPUs: the CDI spec gangway writes describes "
            f"whole GPUs, not a MIG partition ({mig_profile}); use a flavor of whole GPUs "
            "(extended resource or DRA), or leave container_gpus off."
        )
    if not seccomp_profile:
        return (
            "Containers in Ray pods are not enabled on this platform: it needs a seccomp "
            "profile that allows rootless podman on the GPU nodes "
            "(CONTAINER_GPUS_SECCOMP_PROFILE; see docs/containers.md)."
        )
    if pod_security == "restricted":
        return (
            "This tenant's namespace enforces Pod Security 'restricted', which forbids "
            "what rootless podman needs (the SETUID and SETGID capabilities and privilege "
            "escalation for newuidmap); ask a platform admin for 'baseline', or leave "
            "container_gpus off."
        )
    return ""


def _check_dev(
    errors: dict[str, str],
    spec: FlavorSpec,
    workers: int,
    min_workers: int | None,
    max_workers: int | None,
) -> None:
    if not 1 <= workers <= DEV_MAX_WORKERS:
        errors["workers"] = f"A dev cluster has 1 to {DEV_MAX_WORKERS} workers."
    elif spec.node_count and workers > spec.gpus_per_node * spec.node_count:
        errors["workers"] = (
            f"{workers} single-GPU workers: the fleet has only "
            f"{spec.gpus_per_node * spec.node_count} {spec.name} GPUs, so this can never fit."
        )
    # Dev clusters do not autoscale: a fixed gang is what per-user GPU caps count.
    if min_workers is not None:
        errors["min_workers"] = "Autoscaling is for production clusters; leave it out for dev."
    if max_workers is not None:
        errors["max_workers"] = "Autoscaling is for production clusters; leave it out for dev."


def _check_prod(
    errors: dict[str, str],
    spec: FlavorSpec,
    workers: int,
    min_workers: int | None,
    max_workers: int | None,
) -> None:
    if workers < 1:
        errors["workers"] = "A production cluster has at least one worker."
        return
    replicas, low, high = replica_bounds(
        kind="prod", workers=workers, min_workers=min_workers, max_workers=max_workers
    )
    if low > high:
        errors["min_workers"] = f"min_workers ({low}) is above max_workers ({high})."
    elif not low <= replicas <= high:
        field = "min_workers" if low > replicas else "max_workers"
        errors[field] = f"Need min_workers ({low}) <= workers ({replicas}) <= max_workers ({high})."
    elif spec.node_count and high > spec.node_count:
        field = "max_workers" if max_workers is not None else "workers"
        errors[field] = (
            f"{high} whole-node workers: the fleet has only {spec.node_count} {spec.name} "
            f"nodes ({spec.gpus_per_node} GPUs each), so this can never fit."
        )


def _check_kueue_fixed_size(
    errors: dict[str, str], workers: int, min_workers: int | None, max_workers: int | None
) -> None:
    _, low, high = replica_bounds(
        kind="prod", workers=workers, min_workers=min_workers, max_workers=max_workers
    )
    if low != high:
        field = "max_workers" if max_workers is not None else "min_workers"
        errors[field] = (
            "Autoscaling is not available here: Kueue admits a Ray cluster at one fixed "
            "size. Leave min_workers and max_workers out and set workers to the size you need."
        )


def _check_fraction(
    errors: dict[str, str], spec: FlavorSpec, kind: str, fraction: Decimal, kai_enabled: bool
) -> None:
    if kind != "dev":
        errors["gpu_fraction"] = (
            "Fractional GPUs are for dev clusters only (they are not isolated)."
        )
    elif not spec.sharing:
        errors["gpu_fraction"] = f"Flavor {spec.name!r} does not allow GPU sharing."
    elif not kai_enabled:
        errors["gpu_fraction"] = "Fractional GPUs need the KAI scheduler, which is not enabled."
    elif not Decimal(0) < fraction < Decimal(1):
        errors["gpu_fraction"] = "A GPU fraction is strictly between 0 and 1."
