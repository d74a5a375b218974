"""``queue``, ``usage``, ``flavors``, ``images`` and ``completion``."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer
from typer._completion_shared import get_completion_script

from gangway_cli import output
from gangway_cli.app import OutputOpt, TenantOpt, app, session, set_mode


class Days(StrEnum):
    """The usage windows the API offers."""

    week = "7"
    month = "30"
    quarter = "90"


class Shell(StrEnum):
    """The shells whose completion scripts the CLI prints."""

    bash = "bash"
    zsh = "zsh"


@app.command()
def queue(ctx: typer.Context, tenant: TenantOpt = None, output_option: OutputOpt = None) -> None:
    """Your tenant's waiting requests, in queue order, with why and until when."""
    s = session(ctx, output_option, tenant=tenant)
    items = s.client.get_all(s.tenant_path("queue/"))

    def show() -> None:
        rows = [
            (
                q.get("position"),
                q["name"],
                q.get("owner"),
                ",".join(q.get("flavors") or []),
                q.get("gpus"),
                q.get("reason"),
                output.when(q.get("eta")),
                q.get("message"),
            )
            for q in items
        ]
        columns = ["#", "NAME", "OWNER", "FLAVOR", "GPUS", "REASON", "ETA", "WHY"]
        if items:
            output.stdout.print(output.table(columns, rows))
        else:
            output.stdout.print(f"Nothing waits in {s.tenant()}'s queue.")

    output.emit(s.mode, items, show)


@app.command()
def usage(
    ctx: typer.Context,
    days: Annotated[Days, typer.Option(help="The last N days.")] = Days.month,
    tenant: TenantOpt = None,
    output_option: OutputOpt = None,
) -> None:
    """GPU-hours of your tenant per user and flavor."""
    s = session(ctx, output_option, tenant=tenant)
    summary = s.client.get(s.tenant_path("usage/"), params={"days": days.value})

    def show() -> None:
        output.stdout.print(
            f"{s.tenant()}: {summary.get('total_gpu_hours')} GPU-hours "
            f"in the last {days.value} days "
            f"({summary.get('active_gpu_hours')} active, {summary.get('idle_gpu_hours')} idle)"
        )
        rows: list[tuple[Any, ...]] = [
            (r.get("user"), r.get("flavor"), r.get("gpu_hours"))
            for r in summary.get("by_user_and_flavor", [])
        ]
        output.stdout.print(output.table(["USER", "FLAVOR", "GPU-HOURS"], rows))

    output.emit(s.mode, summary, show)


@app.command()
def flavors(ctx: typer.Context, output_option: OutputOpt = None) -> None:
    """The GPU flavors of the catalogue (what --flavor takes)."""
    s = session(ctx, output_option)
    items = s.client.get_all("/api/v1/flavors/")
    columns = ["NAME", "GPU", "GPUS/NODE", "NODES", "DEVICES"]
    rows = [
        (
            f["name"],
            f.get("gpu_product"),
            f.get("gpus_per_node"),
            f.get("node_count"),
            f.get("devices_in_words", ""),
        )
        for f in items
    ]
    output.emit(s.mode, items, lambda: output.stdout.print(output.table(columns, rows)))


@app.command("priority-classes")
def priority_classes(ctx: typer.Context, output_option: OutputOpt = None) -> None:
    """The priority classes your tenant may pick (what --priority-class takes)."""
    s = session(ctx, output_option)
    answer = s.client.get(s.tenant_path("priority-classes/"))
    items = answer if isinstance(answer, list) else answer.get("results", [])
    columns = ["NAME", "VALUE", "PREEMPTS", "DEFAULT", "DESCRIPTION"]
    rows = [
        (
            c["name"],
            c.get("value"),
            "yes" if c.get("may_preempt") else "no",
            "yes" if c.get("is_default") else "",
            c.get("description", ""),
        )
        for c in items
    ]
    output.emit(s.mode, items, lambda: output.stdout.print(output.table(columns, rows)))


@app.command()
def images(ctx: typer.Context, output_option: OutputOpt = None) -> None:
    """The Ray images clusters may use (what --image takes)."""
    s = session(ctx, output_option)
    answer = s.client.get("/api/v1/images/")
    items = answer if isinstance(answer, list) else answer.get("results", answer.get("images", []))

    def show() -> None:
        for item in items:
            output.stdout.print(item if isinstance(item, str) else item.get("image", item))

    output.emit(s.mode, answer, show)


@app.command()
def completion(
    ctx: typer.Context,
    shell: Annotated[Shell, typer.Argument(help="bash or zsh.")],
) -> None:
    """Print the shell completion script: `source <(gangway completion bash)`, or
    `gangway --install-completion` to install it for your shell."""
    set_mode(ctx, None)
    script = get_completion_script(
        prog_name="gangway", complete_var="_GANGWAY_COMPLETE", shell=shell.value
    )
    print(script)
