"""The Typer application, its shared options, and the per-invocation :class:`Session`.

Every command takes ``--output/-o table|json``; the tenant-scoped ones take ``--tenant``
(or ``GANGWAY_TENANT``); ``--server`` (or ``GANGWAY_SERVER``) works everywhere. The same
options given before the command (``gangway -o json ls``) apply to it too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any

import typer

from gangway_cli import config, exitcodes, output
from gangway_cli.client import ApiClient, connect
from gangway_cli.errors import CliError

HELP = (
    "Request, watch, connect to and tear down Ray clusters, jobs and services on gangway. "
    "Start with `gangway login --server URL`; docs/cli.md has the details."
)

app = typer.Typer(
    name="gangway",
    help=HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
job_app = typer.Typer(
    help="Batch jobs: submit, follow, list, stop.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(job_app, name="job")
service_app = typer.Typer(
    help="Ray Serve services: submit, list, upgrade, delete.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(service_app, name="service")


class OutputMode(StrEnum):
    """The two ways of printing."""

    table = output.TABLE
    json = output.JSON


OutputOpt = Annotated[
    OutputMode | None,
    typer.Option(
        "--output",
        "-o",
        case_sensitive=False,
        help="table (for people) or json (the API's JSON, for scripts).",
        show_default=False,
    ),
]
TenantOpt = Annotated[
    str | None,
    typer.Option(
        "--tenant",
        "-t",
        help="The tenant (slug); default: GANGWAY_TENANT, else your only tenant.",
        show_default=False,
    ),
]
ServerOpt = Annotated[
    str | None,
    typer.Option(
        "--server",
        help="The gangway server URL; default: GANGWAY_SERVER, else the one you signed in to.",
        show_default=False,
    ),
]

# The output mode of this invocation, for main() to print an error in the right form.
current_mode = output.TABLE


@dataclass
class Globals:
    """Options given before the command name."""

    server: str | None = None
    tenant: str | None = None
    output: OutputMode | None = None


@dataclass
class Session:
    """One command's view of the world: how to print, whom to ask, for which tenant."""

    mode: str
    client: ApiClient
    tenant_option: str | None = None
    _me: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def json(self) -> bool:
        return self.mode == output.JSON

    def me(self) -> dict[str, Any]:
        """``GET /api/v1/users/me/``, read once per invocation."""
        if self._me is None:
            self._me = self.client.get("/api/v1/users/me/")
        return self._me

    def tenant(self) -> str:
        """The tenant slug: ``--tenant``, ``GANGWAY_TENANT``, the stored default, or the
        signed-in user's only tenant; several without a choice is a usage error."""
        chosen = (
            self.tenant_option or os.environ.get(config.ENV_TENANT) or config.load().get("tenant")
        )
        if chosen:
            return str(chosen)
        memberships = self.me().get("memberships", [])
        if len(memberships) == 1:
            return str(memberships[0]["tenant"])
        if not memberships:
            raise CliError(
                f"{self.me().get('username')} is in no tenant",
                hint="ask a tenant admin to add you (platform admins: pass --tenant)",
                code=exitcodes.USAGE,
            )
        names = ", ".join(f"{m['tenant']} ({m['role']})" for m in memberships)
        raise CliError(
            f"you are in several tenants: {names}",
            hint=f"choose one with --tenant SLUG or {config.ENV_TENANT}=SLUG",
            code=exitcodes.USAGE,
        )

    def tenant_path(self, rest: str = "") -> str:
        return f"/api/v1/tenants/{self.tenant()}/{rest}"


def session(
    ctx: typer.Context,
    output_option: OutputMode | None,
    *,
    tenant: str | None = None,
    server: str | None = None,
    signed_in: bool = True,
) -> Session:
    """The :class:`Session` of a command, merging its options with the global ones."""
    global current_mode
    top = ctx.find_root().obj if isinstance(ctx.find_root().obj, Globals) else Globals()
    mode = _mode(output_option or top.output)
    current_mode = mode
    client = connect(server or top.server, signed_in=signed_in)
    return Session(mode=mode, client=client, tenant_option=tenant or top.tenant)


def set_mode(ctx: typer.Context, output_option: OutputMode | None) -> str:
    """The output mode alone, for commands that need no server."""
    global current_mode
    top = ctx.find_root().obj if isinstance(ctx.find_root().obj, Globals) else Globals()
    current_mode = _mode(output_option or top.output)
    return current_mode


def _mode(option: OutputMode | None) -> str:
    return option.value if option is not None else output.TABLE
