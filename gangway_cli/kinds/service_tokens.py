"""``gangway service token create|ls|rm``: a service's invoke tokens, on
``/api/v1/tenants/{tenant}/services/{name}/tokens/``. A new token's secret is printed
once (to standard output, alone, so ``$(gangway service token create ...)`` captures it)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from gangway_cli import output
from gangway_cli.app import OutputOpt, TenantOpt, service_app, session
from gangway_cli.commands import workloads
from gangway_cli.kinds.rayservice import KIND, NAME_HELP

token_app = typer.Typer(
    help="A service's invoke tokens: they call its endpoint and nothing else.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
service_app.add_typer(token_app, name="token")

ServiceArg = Annotated[str, typer.Argument(help=NAME_HELP)]


@token_app.command("create")
def create(
    ctx: typer.Context,
    service: ServiceArg,
    name: Annotated[str, typer.Option("--name", "-n", help="Who will use it.")],
    tenant: TenantOpt = None,
    output_option: OutputOpt = None,
) -> None:
    """Create an invoke token; its secret is shown this once."""
    s = session(ctx, output_option, tenant=tenant)
    made = s.client.post(
        workloads.item_path(s, KIND, service, "tokens/"),
        {"name": name},
        what=workloads.what(s, KIND, service),
    )
    output.stderr.print(
        f"Token [bold]{escape(name)}[/] invokes {escape(service)}; copy it now, it is not "
        "shown again:"
    )
    output.emit(s.mode, made, lambda: print(made["token"]))


def _rows(tokens: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [
            t["id"],
            t["name"],
            t["prefix"] + "…",
            t.get("created_by"),
            output.when(t["created_at"]),
            output.when(t.get("last_used_at")) if t.get("last_used_at") else "never",
        ]
        for t in tokens
    ]


@token_app.command("ls")
def list_tokens(
    ctx: typer.Context,
    service: ServiceArg,
    tenant: TenantOpt = None,
    output_option: OutputOpt = None,
) -> None:
    """The service's invoke tokens (never their secrets)."""
    s = session(ctx, output_option, tenant=tenant)
    found = s.client.get(
        workloads.item_path(s, KIND, service, "tokens/"), what=workloads.what(s, KIND, service)
    )
    tokens = found["results"]
    output.emit(
        s.mode,
        found,
        lambda: output.stdout.print(
            output.table(
                ("ID", "NAME", "PREFIX", "CREATED BY", "CREATED", "LAST USED"), _rows(tokens)
            )
        ),
    )


@token_app.command("rm")
def remove(
    ctx: typer.Context,
    service: ServiceArg,
    token_id: Annotated[int, typer.Argument(help="The token's ID (`service token ls`).")],
    tenant: TenantOpt = None,
    output_option: OutputOpt = None,
) -> None:
    """Revoke an invoke token: callers using it are refused at once."""
    s = session(ctx, output_option, tenant=tenant)
    s.client.delete(
        workloads.item_path(s, KIND, service, f"tokens/{token_id}/"),
        what=f"token {token_id} of service '{service}' in tenant '{s.tenant()}'",
    )
    output.emit(
        s.mode,
        {"revoked": token_id},
        lambda: output.stdout.print(f"Token {token_id} of {escape(service)} revoked."),
    )
