"""A service's own fields, as asked (the shape is a ClusterSpec): its Serve config
(``serveConfigV2`` as YAML), its upgrade strategy and its idle policy (scale to zero),
and the checks that refuse a wrong one with a message per field before anything is
written."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from django.core.exceptions import ValidationError

MAX_SERVE_CONFIG = 64 * 1024
# KubeRay names a RayService's clusters "<name>-raycluster-<5 chars>" (at most 63).
MAX_SERVICE_NAME = 40
UPGRADE_TYPES = ("NewCluster", "NewClusterWithIncrementalUpgrade", "None")
INCREMENTAL = "NewClusterWithIncrementalUpgrade"
# KubeRay's clusterUpgradeOptions: percentages in 1..100, the step interval in seconds.
UPGRADE_OPTIONS = {
    "maxSurgePercent": (1, 100),
    "stepSizePercent": (1, 100),
    "intervalSeconds": (1, 3600),
}
# Scale to zero: the window without requests, in minutes. Shorter than a few minutes
# would put a service to sleep between the calls of one user; longer than a week is
# better served by deleting it.
SCALE_TO_ZERO_MINUTES = 30
SCALE_TO_ZERO_BOUNDS = (5, 7 * 24 * 60)
IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*[:.][A-Za-z_]\w*$")


def surge_workers(upgrade_type: str, options: Mapping[str, Any], guaranteed: int) -> int:
    """The workers an upgrade's new cluster may add beyond the service's guaranteed size:
    ``ceil(maxSurgePercent % of guaranteed)`` (at least one) for an incremental upgrade
    (KubeRay's default surge is 100), the whole cluster for any other."""
    if upgrade_type != INCREMENTAL:
        return guaranteed
    surge = int(options.get("maxSurgePercent") or 100)
    return min(guaranteed, max(1, -(-guaranteed * surge // 100)))


@dataclass(frozen=True, kw_only=True)
class ServiceSpec:
    """A service's own fields of the create body (or a PATCH's, for an upgrade)."""

    serve_config: str
    upgrade_type: str = "NewCluster"
    upgrade_options: Mapping[str, int] = field(default_factory=dict, hash=False)
    scale_to_zero: bool = False
    scale_to_zero_after_minutes: int = SCALE_TO_ZERO_MINUTES

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ServiceSpec:
        """From a parsed create body or form."""
        strategy = data.get("upgrade_strategy") or {}
        minutes = data.get("scale_to_zero_after_minutes")
        return cls(
            serve_config=str(data.get("serve_config") or ""),
            upgrade_type=str(strategy.get("type") or "NewCluster"),
            upgrade_options=dict(strategy.get("cluster_upgrade_options") or {}),
            scale_to_zero=bool(data.get("scale_to_zero") or False),
            scale_to_zero_after_minutes=SCALE_TO_ZERO_MINUTES if minutes is None else minutes,
        )


def _number(value: Any, *, integer: bool = False) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) if integer else isinstance(value, int | float)


def _deployment_errors(where: str, dep: Any) -> list[str]:
    if not isinstance(dep, dict) or not isinstance(dep.get("name"), str) or not dep["name"]:
        return [f"{where}: a deployment needs a name."]
    where = f"{where} {dep['name']!r}"
    errors: list[str] = []
    options = dep.get("ray_actor_options")
    if options is not None:
        if not isinstance(options, dict):
            errors.append(f"{where}: ray_actor_options must be a mapping.")
        else:
            for key in ("num_gpus", "num_cpus"):
                if key in options and not (_number(options[key]) and options[key] >= 0):
                    errors.append(f"{where}: ray_actor_options.{key} must be a number >= 0.")
    replicas = dep.get("num_replicas")
    if (
        replicas is not None
        and replicas != "auto"
        and not (_number(replicas, integer=True) and replicas >= 0)
    ):
        errors.append(f'{where}: num_replicas must be an integer >= 0 or "auto".')
    scaling = dep.get("autoscaling_config")
    if scaling is not None:
        errors += _autoscaling_errors(where, scaling, replicas)
    return errors


def _autoscaling_errors(where: str, scaling: Any, replicas: Any) -> list[str]:
    if not isinstance(scaling, dict):
        return [f"{where}: autoscaling_config must be a mapping."]
    if _number(replicas, integer=True):
        return [f"{where}: set num_replicas or autoscaling_config, not both."]
    bounds = {k: scaling.get(k) for k in ("min_replicas", "max_replicas", "initial_replicas")}
    for key, value in bounds.items():
        if value is not None and not (_number(value, integer=True) and value >= 0):
            return [f"{where}: autoscaling_config.{key} must be an integer >= 0."]
    low, high = bounds["min_replicas"] or 0, bounds["max_replicas"]
    if high is not None and (high < 1 or high < low):
        return [f"{where}: autoscaling_config.max_replicas must be >= 1 and >= min_replicas."]
    start = bounds["initial_replicas"]
    if start is not None and (start < low or (high is not None and start > high)):
        return [f"{where}: initial_replicas must lie between min_replicas and max_replicas."]
    return []


def _application_errors(where: str, app: Any, names: set[str], routes: set[str]) -> list[str]:
    """One application's faults; ``names`` and ``routes`` collect those seen so far."""
    if not isinstance(app, dict):
        return [f"{where}: an application must be a mapping."]
    errors: list[str] = []
    name = app.get("name", "default")
    if not isinstance(name, str) or not name or name in names:
        errors.append(f"{where}: each application needs a name of its own.")
    names.add(str(name))
    path = app.get("import_path")
    if not isinstance(path, str) or not IMPORT_PATH.match(path):
        errors.append(f'{where}: import_path must read "module:attribute".')
    route = app.get("route_prefix")
    if route is not None:
        if not isinstance(route, str) or not route.startswith("/") or route in routes:
            errors.append(f"{where}: route_prefix must start with / and be unique.")
        routes.add(str(route))
    deployments = app.get("deployments") or []
    if not isinstance(deployments, list):
        return [*errors, f"{where}: deployments must be a list."]
    for dep in deployments:
        errors += _deployment_errors(f"{where} deployment", dep)
    return errors


def parse_serve_config(text: str) -> dict[str, Any]:
    """The Serve config as a mapping, or a ValidationError on ``serve_config`` saying
    what is wrong (every application and deployment is checked)."""
    if not text.strip():
        raise ValidationError({"serve_config": ["A service needs a Serve config."]})
    if len(text) > MAX_SERVE_CONFIG:
        raise ValidationError({"serve_config": [f"At most {MAX_SERVE_CONFIG} characters."]})
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValidationError({"serve_config": [f"Not valid YAML: {exc}"]}) from None
    apps = config.get("applications") if isinstance(config, dict) else None
    if not isinstance(apps, list) or not apps:
        raise ValidationError(
            {"serve_config": ["It needs 'applications': a list of one or more applications."]}
        )
    errors: list[str] = []
    names: set[str] = set()
    routes: set[str] = set()
    for i, app in enumerate(apps):
        errors += _application_errors(f"applications[{i}]", app, names, routes)
    if errors:
        raise ValidationError({"serve_config": errors})
    return dict(config)


def validate_upgrade(upgrade_type: str, options: Mapping[str, Any], *, autoscales: bool) -> None:
    """Refuse an upgrade strategy KubeRay would refuse (``ValidationFailed``)."""
    if upgrade_type not in UPGRADE_TYPES:
        raise ValidationError(
            {"upgrade_strategy": [f"type must be one of {', '.join(UPGRADE_TYPES)}."]}
        )
    if upgrade_type != INCREMENTAL:
        if options:
            raise ValidationError(
                {"upgrade_strategy": [f"cluster_upgrade_options go with {INCREMENTAL} only."]}
            )
        return
    errors = [f"unknown option {key!r}." for key in sorted(set(options) - set(UPGRADE_OPTIONS))]
    for key, (low, high) in UPGRADE_OPTIONS.items():
        value = options.get(key)
        if value is None and key == "maxSurgePercent":
            continue  # KubeRay's default, 100
        if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= high):
            errors.append(f"{key} must be an integer from {low} to {high}.")
    step, surge = options.get("stepSizePercent"), options.get("maxSurgePercent", 100)
    if isinstance(step, int) and isinstance(surge, int) and step > surge:
        errors.append("stepSizePercent must be at most maxSurgePercent, as KubeRay requires.")
    if not autoscales:
        errors.append(
            f"{INCREMENTAL} needs an autoscaling worker group (min_workers < max_workers)."
        )
    if errors:
        raise ValidationError({"upgrade_strategy": errors})


def validate_idle_window(minutes: Any) -> None:
    """Refuse a scale-to-zero window that is not a whole number of minutes in bounds."""
    low, high = SCALE_TO_ZERO_BOUNDS
    if not (_number(minutes, integer=True) and low <= minutes <= high):
        raise ValidationError(
            {
                "scale_to_zero_after_minutes": [
                    f"A whole number of minutes from {low} to {high} (7 days)."
                ]
            }
        )


def validate_service(spec: ServiceSpec, *, autoscales: bool) -> dict[str, Any]:
    """Check every part, each part's faults at once; the parsed Serve config."""
    errors: dict[str, list[str]] = {}
    config: dict[str, Any] = {}
    try:
        config = parse_serve_config(spec.serve_config)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    try:
        validate_upgrade(spec.upgrade_type, spec.upgrade_options, autoscales=autoscales)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    try:
        validate_idle_window(spec.scale_to_zero_after_minutes)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    if errors:
        raise ValidationError(errors)
    return config
