"""The Ray Serve service kind on the command line: what ``service ls``, ``service
status`` and ``service rm`` show of a service (:data:`KIND`), and the commands only a
service has: ``service submit``, ``service upgrade`` and ``service set``, on
``/api/v1/tenants/{tenant}/services/``. The Serve config is a YAML file (``-`` reads
standard input), sent as it is: the server checks it.
"""

from __future__ import annotations

import sys
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from gangway_cli import exitcodes, output
from gangway_cli.app import OutputOpt, Session, TenantOpt, service_app, session
from gangway_cli.commands import workloads
from gangway_cli.commands.workloads import CliKind, Column
from gangway_cli.errors import CliError

NAME_HELP = "The service's name (`gangway service ls` lists them)."
ConfigOpt = Annotated[
    str,
    typer.Option(
        "--config", "-c", help="Ray Serve config (serveConfigV2) YAML file; - reads stdin."
    ),
]

# The idle policy's options, on `submit` and `set`.
ScaleToZeroOpt = Annotated[
    bool | None,
    typer.Option(
        "--scale-to-zero/--no-scale-to-zero",
        help="Give its GPUs back when idle; the next request wakes it (a cold start).",
    ),
]
IdleMinutesOpt = Annotated[
    int | None,
    typer.Option(
        "--scale-to-zero-after", help="Minutes without requests before it scales to zero."
    ),
]


def idle_policy_body(scale_to_zero: bool | None, minutes: int | None) -> dict[str, Any]:
    """The idle policy's fields of a create or PATCH body, those given only."""
    body: dict[str, Any] = {}
    if scale_to_zero is not None:
        body["scale_to_zero"] = scale_to_zero
    if minutes is not None:
        body["scale_to_zero_after_minutes"] = minutes
    return body


def read_config(path: str) -> str:
    """The Serve config's text from a file, or from standard input for ``-``."""
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}", code=exitcodes.USAGE) from None


def applications_line(service: dict[str, Any]) -> str:
    """``app RUNNING, other DEPLOYING``: each application's status."""
    apps = (service.get("service") or {}).get("applications") or {}
    return ", ".join(f"{name} {app.get('status')}" for name, app in sorted(apps.items()))


def scale_to_zero_line(service: dict[str, Any]) -> str:
    """``after 30 min without requests`` (``scaled to zero ...`` when it is), or ``off``."""
    serving = service.get("service") or {}
    if not serving.get("scale_to_zero"):
        return "off"
    line = f"after {serving.get('scale_to_zero_after_minutes')} min without requests"
    if service.get("state") == "suspended":
        return f"{line}; scaled to zero now, the next request wakes it"
    if serving.get("woken_at") and service.get("state") != "ready":
        return f"{line}; waking (cold start)"
    return line


def _status_fields(service: dict[str, Any], tenant: str) -> list[tuple[str, Any]]:
    serving = service.get("service") or {}
    return [
        *workloads.standing(service, tenant),
        ("why", service.get("state_reason")),
        ("priority class", service.get("priority_class")),
        ("applications", applications_line(service)),
        ("active cluster", serving.get("active_cluster")),
        ("pending cluster", serving.get("pending_cluster")),
        ("upgrading", "yes" if serving.get("upgrading") else "no"),
        ("traffic", traffic_line(service)),
        ("upgrade", upgrade_line(service)),
        ("autoscaling", autoscale_line(service)),
        ("upgrade strategy", (serving.get("upgrade_strategy") or {}).get("type")),
        ("serve endpoints", serving.get("serve_endpoints")),
        ("scale to zero", scale_to_zero_line(service)),
        ("endpoint", (service.get("service_endpoint") or {}).get("url")),
        ("public", "yes" if (service.get("service_endpoint") or {}).get("public") else "no"),
        ("requests", (service.get("service_endpoint") or {}).get("requests")),
        ("flavor", output.flavor(service)),
        ("kube cluster", output.placement(service)),
        ("topology", output.topology(service)),
    ]


KIND = CliKind(
    noun="service",
    name_help=NAME_HELP,
    collection="services",
    app=service_app,
    delete_command="rm",
    helps={
        "ls": "Your tenant's services.",
        "status": "A service's state, applications and timeline.",
        "delete": "Delete a service (its RayService and Ray cluster go).",
    },
    columns=(
        workloads.NAME,
        workloads.STATE,
        workloads.FLAVOR,
        workloads.OWNER,
        Column("APPLICATIONS", applications_line),
        workloads.CREATED,
    ),
    status_fields=_status_fields,
    list_filters=False,
    delete_waits=True,
)


def submit(
    s: Session,
    config: ConfigOpt,
    name: Annotated[str, typer.Option(help="Name.")],
    flavor: Annotated[str, typer.Option("--flavor", "-f", help="GPU flavor, or several: h100,l4.")],
    workers: Annotated[int | None, typer.Option("--workers", "-w", min=0)] = None,
    min_workers: Annotated[int | None, typer.Option(min=0)] = None,
    max_workers: Annotated[int | None, typer.Option(min=0)] = None,
    kind: Annotated[str | None, typer.Option(help="dev or prod.")] = None,
    image: Annotated[str | None, typer.Option(help="Ray image.")] = None,
    upgrade: Annotated[
        str | None,
        typer.Option(help="NewCluster (default), NewClusterWithIncrementalUpgrade or None."),
    ] = None,
    scale_to_zero: ScaleToZeroOpt = None,
    idle_minutes: IdleMinutesOpt = None,
    kube_cluster: workloads.KubeClusterOpt = None,
    region: workloads.RegionOpt = None,
    topology: workloads.TopologyOpt = None,
    topology_mode: workloads.TopologyModeOpt = None,
    priority_class: workloads.PriorityClassOpt = None,
) -> workloads.Creation:
    """Submit a Ray Serve service: a RayService of the given shape serving the config."""
    body: dict[str, Any] = {"name": name, "serve_config": read_config(config)}
    body.update(workloads.flavors_body(flavor))
    body.update(workloads.placement_body(kube_cluster, region, topology, topology_mode))
    shape = {
        "workers": workers,
        "min_workers": min_workers,
        "max_workers": max_workers,
        "kind": kind,
        "image": image,
        "priority_class": priority_class,
    }
    body.update({k: v for k, v in shape.items() if v is not None})
    if upgrade:
        body["upgrade_strategy"] = {"type": upgrade}
    body.update(idle_policy_body(scale_to_zero, idle_minutes))

    def then(service: dict[str, Any]) -> None:
        state = output.state_text(service.get("state"))
        said = f"{escape(name)}: {state}; scale to zero {escape(scale_to_zero_line(service))}"
        output.emit(s.mode, service, lambda: output.stdout.print(said))

    return workloads.Creation(body, then=then)


workloads.register_create(KIND, "submit", submit)


@service_app.command()
def upgrade(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help=NAME_HELP)],
    config: Annotated[
        str | None,
        typer.Option("--config", "-c", help="New Serve config YAML file; - reads stdin."),
    ] = None,
    image: Annotated[str | None, typer.Option(help="New Ray image.")] = None,
    tenant: TenantOpt = None,
    output_option: OutputOpt = None,
) -> None:
    """Upgrade a service: a new Serve config and/or image."""
    s = session(ctx, output_option, tenant=tenant)
    body: dict[str, Any] = {}
    if config:
        body["serve_config"] = read_config(config)
    if image:
        body["image"] = image
    if not body:
        raise CliError("nothing to upgrade: give --config or --image", code=exitcodes.USAGE)
    service = s.client.patch(
        workloads.item_path(s, KIND, name), body, what=workloads.what(s, KIND, name)
    )
    said = upgrade_line(service) or "upgrade requested"
    output.emit(s.mode, service, lambda: output.stdout.print(f"{escape(name)}: {escape(said)}"))


@service_app.command("set")
def set_policy(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help=NAME_HELP)],
    scale_to_zero: ScaleToZeroOpt = None,
    idle_minutes: IdleMinutesOpt = None,
    tenant: TenantOpt = None,
    output_option: OutputOpt = None,
) -> None:
    """Change a service's idle policy (scale to zero and its window)."""
    s = session(ctx, output_option, tenant=tenant)
    body = idle_policy_body(scale_to_zero, idle_minutes)
    if not body:
        raise CliError(
            "nothing to set: give --scale-to-zero, --no-scale-to-zero or --scale-to-zero-after",
            code=exitcodes.USAGE,
        )
    service = s.client.patch(
        workloads.item_path(s, KIND, name), body, what=workloads.what(s, KIND, name)
    )
    said = f"{escape(name)}: scale to zero {escape(scale_to_zero_line(service))}"
    output.emit(s.mode, service, lambda: output.stdout.print(said))


def upgrade_line(service: dict[str, Any]) -> str:
    """Where an upgrade's surge (its new Ray cluster's GPUs) stands; empty without one."""
    surge = service.get("upgrade_surge")
    if not surge:
        return ""
    if surge.get("state") == "waiting":
        return str(surge.get("message") or "upgrade waits for its turn in the queue")
    gpus = format(Decimal(str(surge.get("gpus") or 0)).normalize(), "f")
    return (
        f"upgrade under way: {gpus} {surge.get('flavor')} GPU(s) charged beside the serving cluster"
    )


def traffic_line(service: dict[str, Any]) -> str:
    """An incremental upgrade's split while it runs (empty otherwise): each cluster's
    share of the traffic and of the target capacity, the serving one first."""
    split = (service.get("service") or {}).get("traffic_split") or {}
    sides = [split.get(side) or {} for side in ("active", "pending")]
    if not all(sides):
        return ""
    return " / ".join(
        f"{side.get('cluster')} {side.get('traffic_routed_percent') or 0}% of requests "
        f"(capacity {side.get('target_capacity') or 0}%)"
        for side in sides
    )


def autoscale_line(service: dict[str, Any]) -> str:
    """An autoscaling service's size and growth: what it is charged for, may run now,
    a growth waiting or held on borrowable quota, the last one taken back; empty for a
    fixed-size service."""
    scale = service.get("autoscale")
    if not scale:
        return ""
    said = (
        f"charged for {scale.get('min_workers')} worker(s), may run "
        f"{scale.get('may_run_workers')} of at most {scale.get('max_workers')}"
    )
    growth = scale.get("growth") or {}
    if growth.get("state") == "waiting":
        said += f"; {growth.get('message') or 'its growth waits for its turn in the queue'}"
    elif growth:
        said += f"; {growth.get('workers')} on borrowable quota"
    taken = scale.get("last_reclaim")
    if taken:
        said += f"; growth last taken back at {taken.get('at')}: {taken.get('message')}"
    return said


workloads.register(KIND)
