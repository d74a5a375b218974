"""The commands every workload kind has, filled from the kind's :class:`CliKind`: the
create command (``up``, ``job submit``: the kind's options, a :class:`Creation`), ``ls``
(its requests, with state and why they wait), ``status`` (one request and its timeline)
and the delete command (``down``, ``job rm``), plus the helpers the kinds' own commands
share: the request's API path, its 404 wording, flavors and ``KEY=VALUE`` options."""

# No ``from __future__ import annotations``: Typer reads the commands' annotations, and
# the name argument's help is the kind's, known only inside each factory.
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, get_type_hints

import typer
from rich.markup import escape

from gangway_cli import exitcodes, output
from gangway_cli.app import OutputOpt, Session, TenantOpt, session
from gangway_cli.errors import CliError

POLL_SECONDS = 1.0

StateOpt = Annotated[
    list[str] | None, typer.Option("--state", help="Only these states (repeatable).")
]
MineOpt = Annotated[bool, typer.Option("--mine", help="Only yours.")]
WaitOpt = Annotated[bool, typer.Option("--wait", help="Wait until it is gone.")]


@dataclass(frozen=True)
class Column:
    """One column of a kind's ``ls`` table: its heading and its cell of one request."""

    heading: str
    cell: Callable[[dict[str, Any]], Any]


# The columns most kinds' ``ls`` shows, in the same words.
NAME = Column("NAME", lambda item: item["name"])
STATE = Column("STATE", lambda item: output.state_text(item.get("state")))
FLAVOR = Column("FLAVOR", output.flavor)
OWNER = Column("OWNER", lambda item: item.get("owner"))
CREATED = Column("CREATED", lambda item: output.when(item.get("created_at")))


def standing(item: dict[str, Any], tenant: str) -> list[tuple[str, Any]]:
    """The first ``status`` fields of most kinds: the name, the state and why it waits."""
    return [
        ("name", item["name"]),
        ("state", item.get("state")),
        ("waiting", output.queue_line(item.get("queue"), tenant)),
    ]


@dataclass(frozen=True)
class CliKind:
    """What the shared commands need to know of a workload kind."""

    noun: str  # "cluster": in messages and 404s
    name_help: str  # the help of a command's name argument
    collection: str  # "clusters": the API's path under the tenant
    app: typer.Typer  # where its commands hang (the top level, or `gangway job`)
    delete_command: str  # "down", "rm"
    helps: dict[str, str]  # the help of "ls", "status" and "delete"
    columns: tuple[Column, ...]
    status_fields: Callable[[dict[str, Any], str], list[tuple[str, Any]]]
    empty_hint: str = ""  # said on stderr when ``ls`` finds none
    list_filters: bool = True  # ``ls --state/--mine``
    delete_waits: bool = True  # ``--wait`` on the delete command
    # The exit codes only its commands give, with their meaning (docs/cli.md lists them).
    exit_codes: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class Creation:
    """What a kind's create command made of its options: the create body, what to ask
    before it is sent (``check``: the cluster's verdict), and what to do with the
    created request (``then``: print it, follow it)."""

    body: dict[str, Any]
    then: Callable[[dict[str, Any]], None]
    check: Callable[[dict[str, Any]], None] | None = None
    verb: str = "Submitted"  # "Requested": the first word of the line that names it


def item_path(s: Session, kind: CliKind, name: str = "", rest: str = "") -> str:
    """The API path of the kind's list, of one request, or of one of its sub-resources."""
    return s.tenant_path(f"{kind.collection}/{name}/{rest}" if name else f"{kind.collection}/")


def what(s: Session, kind: CliKind, name: str) -> str:
    """How a 404 names the request: ``cluster 'x' in tenant 'acme'``."""
    return f"{kind.noun} '{name}' in tenant '{s.tenant()}'"


def get_item(s: Session, kind: CliKind, name: str) -> dict[str, Any]:
    """One request's detail; a 404 names it and the tenant."""
    return dict(s.client.get(item_path(s, kind, name), what=what(s, kind, name)))


def parse_env(pairs: list[str]) -> dict[str, str]:
    """``["K=V", ...]`` as a dict; a pair without ``=`` is a usage error."""
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--env {pair!r} is not KEY=VALUE", code=exitcodes.USAGE)
        env[key] = value
    return env


def flavors_body(flavor: str) -> dict[str, Any]:
    """``h100`` -> ``{"flavor": "h100"}``; ``h100,l4`` -> ``{"flavors": ["h100", "l4"]}``."""
    names = [name.strip() for name in flavor.split(",") if name.strip()]
    if not names:
        raise CliError("--flavor names no flavor", code=exitcodes.USAGE)
    return {"flavor": names[0]} if len(names) == 1 else {"flavors": names}


KubeClusterOpt = Annotated[
    str | None,
    typer.Option("--kube-cluster", help="Run on this Kubernetes cluster of the fleet."),
]
PriorityClassOpt = Annotated[
    str | None,
    typer.Option(
        "--priority-class",
        help="The platform priority class to run in (`gangway priority-classes`; default: "
        "the default class).",
    ),
]
RegionOpt = Annotated[
    str | None, typer.Option("--region", help="Run on a Kubernetes cluster of this region.")
]
TopologyOpt = Annotated[
    str | None,
    typer.Option(
        "--topology",
        help="Keep a production gang's workers in one domain of this level of its flavor's "
        "topology, e.g. network.topology.kubernetes.io/rack (docs/topology.md).",
    ),
]
TopologyModeOpt = Annotated[
    str | None,
    typer.Option("--topology-mode", help="required (default) or preferred."),
]


def placement_body(
    kube_cluster: str | None,
    region: str | None,
    topology: str | None = None,
    topology_mode: str | None = None,
) -> dict[str, Any]:
    """``--kube-cluster``/``--region``/``--topology``/``--topology-mode`` as the create
    body's ``kube_cluster``/``region``/``topology_level``/``topology_mode`` (left out when
    not given, so that older servers still answer)."""
    asked = {
        "kube_cluster": kube_cluster,
        "region": region,
        "topology_level": topology,
        "topology_mode": topology_mode,
    }
    return {key: value for key, value in asked.items() if value}


def no_json_follow(s: Session, follow: bool) -> None:
    """``--follow`` prints text as it comes: with ``-o json`` it is a usage error."""
    if follow and s.json:
        raise CliError("--follow prints text; leave out -o json", code=exitcodes.USAGE)


def read_log(s: Session, kind: CliKind, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """One read of a request's log: with ``-o json`` its answer is printed (``None``
    returned); else why there is no text, if there is none, goes to stderr and the
    answer is the caller's to print."""
    answer = s.client.get(
        item_path(s, kind, name, "logs/"), params=params, what=what(s, kind, name)
    )
    if s.json:
        output.print_json(answer)
        return None
    if not answer.get("text") and answer.get("message"):
        output.stderr.print(escape(str(answer["message"])))
    return dict(answer)


def show_timeline(events: list[dict[str, Any]]) -> None:
    """A request's events as a table, oldest first."""
    rows = [
        (
            output.clock(e.get("at")),
            f"{e.get('from_state') or ''} -> {e.get('to_state') or ''}"
            if e.get("from_state") != e.get("to_state")
            else e.get("to_state"),
            e.get("actor_name"),
            e.get("message") or e.get("reason"),
        )
        for e in events
    ]
    output.stdout.print(output.table(["WHEN", "STATE", "BY", "WHAT"], rows, title="Timeline"))


def _without(command: Callable[..., None], *names: str) -> Callable[..., None]:
    """The command without the options ``names``: Typer reads a command's options from
    its signature, so a kind that does not offer them leaves them out of it (their
    defaults stand)."""
    signature = inspect.signature(command)
    kept = [p for p in signature.parameters.values() if p.name not in names]
    command.__signature__ = signature.replace(parameters=kept)  # type: ignore[attr-defined]
    return command


def _list_command(kind: CliKind) -> Callable[..., None]:
    def list_items(
        ctx: typer.Context,
        state: StateOpt = None,
        mine: MineOpt = False,
        tenant: TenantOpt = None,
        output_option: OutputOpt = None,
    ) -> None:
        s = session(ctx, output_option, tenant=tenant)
        params: dict[str, Any] = {"ordering": "-created_at"}
        if state:
            params["state"] = state
        if mine:
            params["owner"] = s.me()["username"]
        items = s.client.get_all(item_path(s, kind), params)

        def show() -> None:
            rows = [tuple(column.cell(item) for column in kind.columns) for item in items]
            output.stdout.print(output.table([c.heading for c in kind.columns], rows))
            if not items and kind.empty_hint:
                output.stderr.print(kind.empty_hint)

        output.emit(s.mode, items, show)

    return list_items if kind.list_filters else _without(list_items, "state", "mine")


def _status_command(kind: CliKind) -> Callable[..., None]:
    def status(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(help=kind.name_help)],
        tenant: TenantOpt = None,
        output_option: OutputOpt = None,
    ) -> None:
        s = session(ctx, output_option, tenant=tenant)
        item = get_item(s, kind, name)

        def show() -> None:
            output.stdout.print(output.fields(kind.status_fields(item, s.tenant())))
            show_timeline(item.get("events") or [])

        output.emit(s.mode, item, show)

    return status


def _delete_command(kind: CliKind) -> Callable[..., None]:
    def delete(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(help=kind.name_help)],
        wait: WaitOpt = False,
        tenant: TenantOpt = None,
        output_option: OutputOpt = None,
    ) -> None:
        s = session(ctx, output_option, tenant=tenant)
        item = s.client.delete(item_path(s, kind, name), what=what(s, kind, name))
        if wait:
            try:
                while True:
                    item = get_item(s, kind, name)
                    time.sleep(POLL_SECONDS)
            except CliError as gone:
                if gone.code != exitcodes.NOT_FOUND:
                    raise
        output.emit(
            s.mode,
            item,
            lambda: output.stdout.print(
                f"{escape(name)} deleted." if wait else f"Deleting {escape(name)}."
            ),
        )

    return delete if kind.delete_waits else _without(delete, "wait")


def register_create(
    kind: CliKind, command: str, options: Callable[..., Creation]
) -> Callable[..., None]:
    """Hang the kind's create command: its options are those of ``options(s, ...)`` (Typer
    reads them from its signature, its help from its docstring), which turns them into a
    :class:`Creation`; the command sends the body and names what it created."""

    def create(
        ctx: typer.Context, tenant: TenantOpt = None, output_option: OutputOpt = None, **given: Any
    ) -> None:
        s = session(ctx, output_option, tenant=tenant)
        creation = options(s, **given)
        if creation.check is not None:
            creation.check(creation.body)
        item = s.client.post(item_path(s, kind), creation.body)
        name = escape(str(item["name"]))
        output.stderr.print(f"{creation.verb} [bold]{name}[/] in {escape(s.tenant())}.")
        creation.then(item)

    # The kind's options (their annotations evaluated: kinds may postpone them), between
    # the context and the options every command has.
    hints = get_type_hints(options, include_extras=True)
    own = list(inspect.signature(options).parameters.values())[1:]
    shared = list(inspect.signature(create).parameters.values())
    create.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [shared[0], *(p.replace(annotation=hints[p.name]) for p in own), *shared[1:3]]
    )
    create.__doc__ = options.__doc__
    kind.app.command(command)(create)
    return create


def register(kind: CliKind) -> None:
    """Hang the commands every kind has on the kind's Typer app."""
    kind.app.command("ls", help=kind.helps["ls"])(_list_command(kind))
    kind.app.command("status", help=kind.helps["status"])(_status_command(kind))
    kind.app.command(kind.delete_command, help=kind.helps["delete"])(_delete_command(kind))
