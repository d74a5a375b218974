"""The Ray cluster kind on the command line: what ``ls``, ``status`` and ``down`` show of
a cluster (:data:`KIND`), and the commands only a cluster has: ``up``, ``extend``,
``suspend``, ``resume``, ``keepalive``, ``manifests``, ``logs`` and ``dashboard``.

All of them speak ``/api/v1/tenants/{tenant}/clusters/``: ``up`` asks the dry-run for a
verdict first, creates, then polls the detail (the API has no event stream) until the
cluster is ready, showing its state and, while it waits, its queue position, reason and ETA.
"""

from __future__ import annotations

import sys
import time
import webbrowser
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.prompt import Confirm

from gangway_cli import durations, exitcodes, output
from gangway_cli.app import OutputOpt, Session, TenantOpt, app, session
from gangway_cli.commands import workloads
from gangway_cli.commands.workloads import CliKind, Column
from gangway_cli.errors import CliError
from gangway_cli.follow import new_lines

POLL_SECONDS = 1.0
LOG_POLL_SECONDS = 2.0
# A cluster in one of these will never become ready by waiting.
GIVEN_UP = ("failed", "deleting", "deleted", "suspended")

NAME_HELP = "The cluster's name (`gangway ls` lists them)."
NameArg = Annotated[str, typer.Argument(help=NAME_HELP)]


def _require_flavor(s: Session, flavor: str | None) -> str:
    if flavor:
        return flavor
    names = [f["name"] for f in s.client.get_all("/api/v1/flavors/")]
    raise CliError(
        "which GPU flavor? --flavor is required",
        hint=f"pass --flavor with one of: {', '.join(names)} (several in order: h100,l4)",
        code=exitcodes.USAGE,
    )


# -- reading ---------------------------------------------------------------------------


def _waiting(cluster: dict[str, Any]) -> str:
    if cluster.get("state") == "queued":
        return output.queue_line(cluster.get("queue"), "")
    return str(cluster.get("state_reason") or cluster.get("last_error") or "")


def _status_fields(cluster: dict[str, Any], tenant: str) -> list[tuple[str, Any]]:
    activity = cluster.get("activity") or {}
    endpoints = cluster.get("endpoints") or {}
    return [
        ("name", cluster["name"]),
        ("tenant", cluster.get("tenant")),
        ("state", cluster.get("state")),
        ("reason", _waiting(cluster)),
        ("error", cluster.get("last_error")),
        ("kind", cluster.get("kind")),
        ("flavor", output.flavor(cluster)),
        ("kube cluster", output.placement(cluster)),
        ("topology", output.topology(cluster)),
        ("workers", cluster.get("workers")),
        ("gpus", cluster.get("gpus")),
        ("owner", cluster.get("owner")),
        ("priority class", cluster.get("priority_class")),
        ("image", cluster.get("image")),
        ("created", output.when(cluster.get("created_at"))),
        ("ready", output.when(cluster.get("ready_at"))),
        ("expires", output.when(cluster.get("expires_at"))),
        ("idle", f"{activity['idle_minutes']} min" if activity else None),
        ("dashboard", endpoints.get("dashboard_proxy_url")),
        ("notebook", endpoints.get("notebook_url")),
    ]


KIND = CliKind(
    noun="cluster",
    name_help=NAME_HELP,
    collection="clusters",
    app=app,
    delete_command="down",
    helps={
        "ls": "Your tenant's clusters, with their state and why they wait.",
        "status": "A cluster's state, shape, connection and timeline.",
        "delete": "Delete a cluster (or withdraw a waiting request).",
    },
    columns=(
        workloads.NAME,
        workloads.STATE,
        workloads.FLAVOR,
        Column("WORKERS", lambda c: c.get("workers")),
        Column("GPUS", lambda c: c.get("gpus")),
        Column("OWNER", lambda c: c.get("owner")),
        Column("EXPIRES", lambda c: output.when(c.get("expires_at"))),
        Column("NOTE", _waiting),
    ),
    status_fields=_status_fields,
    empty_hint="No clusters. `gangway up --flavor FLAVOR` asks for one.",
)


# -- up --------------------------------------------------------------------------------


def show_verdict(verdict: dict[str, Any]) -> None:
    """The dry-run's verdict in words, on stderr (stdout is for the result): the
    server's headline (where, what is charged, when), its reasons and alternatives."""
    kind = verdict.get("verdict")
    say = output.stderr.print
    colour = {"fits_now": "green", "will_queue": "yellow"}.get(str(kind), "red")
    say(f"[{colour}]{escape(str(verdict.get('headline') or kind))}[/]")
    if kind != "fits_now":
        for reason in verdict.get("reasons", []):
            say(f"  {escape(reason.get('code', ''))}: {escape(reason.get('message', ''))}")
    for alternative in verdict.get("alternatives", []):
        say(
            f"  alternative: {escape(str(alternative.get('flavor')))} "
            f"{escape(str(alternative.get('message') or alternative.get('verdict')))}"
        )
    if verdict.get("budget_note"):
        say(f"  note: {escape(verdict['budget_note'])}")


def describe(cluster: dict[str, Any]) -> str:
    """One line on where a cluster is: its state and why it waits (rich markup)."""
    state = cluster.get("state", "?")
    detail = ""
    if state == "queued" and cluster.get("queue"):
        detail = output.queue_line(cluster["queue"], cluster.get("tenant", ""))
    elif cluster.get("state_reason"):
        detail = str(cluster["state_reason"])
    elif cluster.get("last_error"):
        detail = str(cluster["last_error"])
    return f"{cluster.get('name')}: {output.state_text(state)}" + (
        f" - {escape(detail)}" if detail else ""
    )


def new_transitions(cluster: dict[str, Any], seen: set[tuple[str, str]]) -> list[dict[str, Any]]:
    """The state changes of ``cluster``'s timeline not in ``seen`` (which it updates):
    polling can miss a state that lasted less than a poll, its history cannot."""
    fresh = []
    for event in cluster.get("events") or []:
        key = (str(event.get("at")), str(event.get("to_state")))
        if key in seen:
            continue
        seen.add(key)
        if event.get("from_state") and event.get("from_state") != event.get("to_state"):
            fresh.append(event)
    return fresh


def wait_until(
    s: Session,
    name: str,
    done: tuple[str, ...],
    *,
    given_up: tuple[str, ...] = GIVEN_UP,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Poll the cluster until its state is one of ``done``; a live status line on a
    terminal, one line per change otherwise. A state in ``given_up`` is an error."""
    deadline = time.monotonic() + timeout if timeout else None
    last_line = ""
    seen: set[tuple[str, str]] = set()
    live = output.stderr.is_terminal
    status = output.stderr.status("", spinner="dots") if live else None
    if status is not None:
        status.start()
    try:
        while True:
            cluster = workloads.get_item(s, KIND, name)
            state = cluster.get("state", "")
            line = describe(cluster)
            for event in new_transitions(cluster, seen):
                output.stderr.print(
                    f"  {output.clock(event.get('at'))}  {event.get('from_state')} -> "
                    f"{output.state_text(event.get('to_state'))}  "
                    f"[dim]{escape(str(event.get('message') or ''))}[/]"
                )
            if status is not None:
                status.update(line)
            elif line != last_line:
                output.stderr.print(line, highlight=False)
            last_line = line
            if state in done:
                return cluster
            if state in given_up:
                why = cluster.get("last_error") or cluster.get("state_reason") or state
                raise CliError(
                    f"cluster '{name}' is {state}: {why}",
                    hint=f"`gangway status {name}` shows its timeline",
                    code=exitcodes.ERROR,
                )
            if deadline is not None and time.monotonic() > deadline:
                raise CliError(
                    f"cluster '{name}' is still {state} after the --timeout",
                    hint=f"it keeps its place; `gangway status {name}` follows it, "
                    f"`gangway down {name}` deletes it",
                    code=exitcodes.ERROR,
                )
            time.sleep(POLL_SECONDS)
    finally:
        if status is not None:
            status.stop()


def _interrupted(s: Session, name: str) -> None:
    """Ctrl-C while waiting: ask whether to keep the request (a terminal), else keep it."""
    output.stderr.print()
    keep = True
    if sys.stdin.isatty():
        try:
            keep = Confirm.ask(
                "Keep the request in the queue?", default=True, console=output.stderr
            )
        except (KeyboardInterrupt, EOFError):
            keep = True
    if keep:
        output.stderr.print(
            f"Kept '{name}'. `gangway status {name}` follows it; `gangway down {name}` deletes it."
        )
    else:
        s.client.delete(workloads.item_path(s, KIND, name), what=workloads.what(s, KIND, name))
        output.stderr.print(f"Deleted the request '{name}'.")
    raise typer.Exit(exitcodes.INTERRUPTED)


def print_connection(cluster: dict[str, Any]) -> None:
    """How to reach a ready cluster: the dashboard through the control plane, and the
    addresses for ``ray.init`` the API gives."""
    endpoints = cluster.get("endpoints") or {}
    name = cluster.get("name")
    output.stdout.print(f"[green]{escape(str(name))} is ready.[/]")
    output.stdout.print(
        output.fields(
            [
                ("Ray dashboard", endpoints.get("dashboard_proxy_url")),
                ("Ray API (jobs)", endpoints.get("api_proxy_url")),
                ("ray.init (in-cluster)", f'ray.init("{endpoints.get("client_address")}")'),
                ("port-forward", endpoints.get("port_forward")),
                ("ray.init (forwarded)", 'ray.init("ray://localhost:10001")'),
            ]
        )
    )


def up(
    s: Session,
    name: Annotated[str | None, typer.Argument(help="Name (default: generated).")] = None,
    flavor: Annotated[
        str | None, typer.Option("--flavor", "-f", help="GPU flavor, or several: h100,l4.")
    ] = None,
    workers: Annotated[int, typer.Option("--workers", "-w", min=0, help="GPU workers.")] = 1,
    kind: Annotated[str, typer.Option(help="dev or prod.")] = "dev",
    ttl: Annotated[
        str | None, typer.Option(help="Time to live in whole hours: 8h, 1d (default: policy).")
    ] = None,
    image: Annotated[str | None, typer.Option(help="Ray image (`gangway images`).")] = None,
    env: Annotated[
        list[str] | None, typer.Option("--env", "-e", help="KEY=VALUE for the Ray containers.")
    ] = None,
    notebook: Annotated[
        bool, typer.Option("--notebook", help="Run JupyterLab on the head (`gangway status`).")
    ] = False,
    ssh: Annotated[
        bool, typer.Option("--ssh", help="Run an SSH server on the head (`gangway ssh`).")
    ] = False,
    kube_cluster: workloads.KubeClusterOpt = None,
    region: workloads.RegionOpt = None,
    topology: workloads.TopologyOpt = None,
    topology_mode: workloads.TopologyModeOpt = None,
    priority_class: workloads.PriorityClassOpt = None,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Follow until ready.")] = True,
    timeout: Annotated[
        str | None, typer.Option(help="Give up waiting after this long (e.g. 30m).")
    ] = None,
) -> workloads.Creation:
    """Ask for a Ray cluster: show the verdict, create it and follow it until ready."""
    body: dict[str, Any] = {
        "kind": kind,
        "workers": workers,
        **workloads.flavors_body(_require_flavor(s, flavor)),
        **workloads.placement_body(kube_cluster, region, topology, topology_mode),
    }
    if name:
        body["name"] = name
    try:
        if ttl:
            body["ttl_hours"] = durations.parse_hours(ttl)
        limit = durations.parse_seconds(timeout) if timeout else None
    except ValueError as exc:
        raise CliError(str(exc), code=exitcodes.USAGE) from None
    if image:
        body["image"] = image
    if priority_class:
        body["priority_class"] = priority_class
    if env:
        body["env"] = workloads.parse_env(env)
    # The head's extras are asked for only when wanted, so older servers still answer.
    body.update({key: True for key, wanted in (("notebook", notebook), ("ssh", ssh)) if wanted})
    return workloads.Creation(
        body,
        check=lambda asked: _check_verdict(s, asked),
        then=lambda cluster: _requested(s, cluster, wait=wait, limit=limit),
        verb="Requested",
    )


def _check_verdict(s: Session, body: dict[str, Any]) -> None:
    """Show the dry-run's verdict; a request that can never fit goes no further."""
    verdict = s.client.post(s.tenant_path("clusters/dry-run/"), body)
    show_verdict(verdict)
    if verdict.get("verdict") == "never_fits":
        reasons = "; ".join(r.get("message", "") for r in verdict.get("reasons", []))
        raise CliError(
            f"this request can never fit: {reasons}",
            hint="ask for fewer workers or another flavor (see the alternatives above)",
            code=exitcodes.NEVER_FITS,
            body=verdict if s.json else None,
        )


def _requested(s: Session, cluster: dict[str, Any], *, wait: bool, limit: float | None) -> None:
    name = str(cluster["name"])
    if wait:
        try:
            cluster = wait_until(s, name, ("ready",), timeout=limit)
        except KeyboardInterrupt:
            _interrupted(s, name)
    if s.json:
        output.print_json(cluster)
    elif cluster.get("state") == "ready":
        print_connection(cluster)
    else:
        output.stdout.print(describe(cluster))
        output.stdout.print(f"`gangway status {name}` follows it.")


workloads.register_create(KIND, "up", up)
workloads.register(KIND)


# -- changing --------------------------------------------------------------------------


def _act(s: Session, name: str, action: str, body: Any, said: str) -> None:
    cluster = s.client.post(
        workloads.item_path(s, KIND, name, f"{action}/"), body, what=workloads.what(s, KIND, name)
    )
    output.emit(s.mode, cluster, lambda: output.stdout.print(f"{escape(said)} {describe(cluster)}"))


@app.command()
def extend(
    ctx: typer.Context,
    name: NameArg,
    duration: Annotated[str, typer.Argument(help="How much longer, in whole hours: 2h, 1d.")],
    tenant: TenantOpt = None,
    output_option: OutputOpt = None,
) -> None:
    """Give a cluster more time before it expires."""
    s = session(ctx, output_option, tenant=tenant)
    try:
        hours = durations.parse_hours(duration)
    except ValueError as exc:
        raise CliError(str(exc), code=exitcodes.USAGE) from None
    cluster = s.client.post(
        workloads.item_path(s, KIND, name, "extend/"),
        {"hours": hours},
        what=workloads.what(s, KIND, name),
    )
    output.emit(
        s.mode,
        cluster,
        lambda: output.stdout.print(
            f"{escape(name)} now expires {output.when(cluster.get('expires_at'))} "
            f"({cluster.get('expires_at')})."
        ),
    )


@app.command()
def suspend(
    ctx: typer.Context,
    name: NameArg,
    reason: Annotated[str, typer.Option(help="Why, for the timeline.")] = "",
    tenant: TenantOpt = None,
    output_option: OutputOpt = None,
) -> None:
    """Suspend a cluster: its GPUs go back; `resume` queues it again."""
    s = session(ctx, output_option, tenant=tenant)
    _act(s, name, "suspend", {"reason": reason}, "Suspended.")


@app.command()
def resume(
    ctx: typer.Context, name: NameArg, tenant: TenantOpt = None, output_option: OutputOpt = None
) -> None:
    """Resume a suspended cluster (it goes back through the queue)."""
    s = session(ctx, output_option, tenant=tenant)
    _act(s, name, "resume", None, "Resumed.")


@app.command()
def keepalive(
    ctx: typer.Context, name: NameArg, tenant: TenantOpt = None, output_option: OutputOpt = None
) -> None:
    """Count now as use of a ready cluster: its idle clock starts again."""
    s = session(ctx, output_option, tenant=tenant)
    _act(s, name, "keepalive", None, "Kept alive.")


@app.command()
def manifests(
    ctx: typer.Context, name: NameArg, tenant: TenantOpt = None, output_option: OutputOpt = None
) -> None:
    """The Kubernetes objects of a cluster, as YAML (JSON with -o json)."""
    s = session(ctx, output_option, tenant=tenant)
    path = workloads.item_path(s, KIND, name, "manifests/")
    if s.json:
        output.print_json(s.client.get(path, what=workloads.what(s, KIND, name)))
    else:
        text = s.client.get(path, accept="application/yaml", what=workloads.what(s, KIND, name))
        sys.stdout.write(str(text))


def _log_params(pod: str | None, container: str | None, tail: int) -> dict[str, Any]:
    params: dict[str, Any] = {"tail": tail}
    if pod:
        params["pod"] = pod
    if container:
        params["container"] = container
    return params


def print_log_text(text: str) -> list[str]:
    lines = text.splitlines()
    for line in lines:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
    return lines


@app.command()
def logs(
    ctx: typer.Context,
    name: NameArg,
    pod: Annotated[
        str | None, typer.Option(help="A pod of the cluster (default: the head).")
    ] = None,
    container: Annotated[str | None, typer.Option(help="Its container.")] = None,
    tail: Annotated[int, typer.Option(min=1, max=5000, help="Last lines.")] = 200,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing.")] = False,
    tenant: TenantOpt = None,
    output_option: OutputOpt = None,
) -> None:
    """A pod's log: the head's by default; `--pod` another (listed in -o json)."""
    s = session(ctx, output_option, tenant=tenant)
    workloads.no_json_follow(s, follow)
    path = workloads.item_path(s, KIND, name, "logs/")
    answer = workloads.read_log(s, KIND, name, _log_params(pod, container, tail))
    if answer is None:
        return
    seen = print_log_text(answer.get("text", ""))
    try:
        while follow:
            time.sleep(LOG_POLL_SECONDS)
            answer = s.client.get(
                path, params=_log_params(pod or answer.get("pod"), container, tail)
            )
            current = str(answer.get("text", "")).splitlines()
            for line in new_lines(seen, current):
                sys.stdout.write(line + "\n")
            sys.stdout.flush()
            seen = current
    except KeyboardInterrupt:
        raise typer.Exit(exitcodes.OK) from None


@app.command()
def dashboard(
    ctx: typer.Context,
    name: NameArg,
    print_only: Annotated[
        bool, typer.Option("--print", "-p", help="Print the URL instead of opening it.")
    ] = False,
    tenant: TenantOpt = None,
    output_option: OutputOpt = None,
) -> None:
    """Open the cluster's Ray dashboard (through the control plane) in a browser."""
    s = session(ctx, output_option, tenant=tenant)
    cluster = workloads.get_item(s, KIND, name)
    url = (cluster.get("endpoints") or {}).get("dashboard_proxy_url")
    if not url:
        raise CliError(
            f"cluster '{name}' is {cluster.get('state')}: its dashboard opens once it is ready",
            hint=f"`gangway status {name}` shows why it is not ready",
            code=exitcodes.REFUSED,
        )
    if s.json:
        output.print_json(cluster.get("endpoints"))
        return
    if not print_only and sys.stdout.isatty() and webbrowser.open(url):
        output.stderr.print(f"Opened {escape(url)} (sign in there with your browser).")
    else:
        output.stdout.print(url, soft_wrap=True)
