"""The entry point: ``gangway`` (console script) and ``python -m gangway_cli``.

``main()`` runs the Typer app outside its standalone mode so that every way out
ends with an exit code of :mod:`gangway_cli.exitcodes`: a :class:`CliError` prints its
message and hint, a usage error Typer's message (code 2), Ctrl-C 130.
"""

from __future__ import annotations

import sys

import typer

from gangway_cli import __version__, app, exitcodes, output
from gangway_cli.app import Globals, OutputOpt, ServerOpt, TenantOpt
from gangway_cli.commands import auth  # noqa: F401  (registers its commands)

# isort: split
# Commands are listed in `gangway --help` in the order they register: sign-in first, the
# workload kinds' next, then the rest.
from gangway_cli import kinds  # noqa: F401
from gangway_cli.commands import misc, tunnels  # noqa: F401
from gangway_cli.errors import CliError


def _version(value: bool) -> None:
    if value:
        print(f"gangway {__version__}")
        raise typer.Exit()


@app.app.callback()
def root(
    ctx: typer.Context,
    server: ServerOpt = None,
    tenant: TenantOpt = None,
    output_option: OutputOpt = None,
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """Keep the global options for every command (``gangway --help`` shows ``app.HELP``)."""
    ctx.obj = Globals(server=server, tenant=tenant, output=output_option)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI and exit with its code."""
    try:
        result = app.app(args=argv, prog_name="gangway", standalone_mode=False)
        code = result if isinstance(result, int) else exitcodes.OK
    except CliError as error:
        output.print_error(error, app.current_mode)
        code = error.code
    except typer.Abort:
        output.stderr.print("interrupted")
        code = exitcodes.INTERRUPTED
    except KeyboardInterrupt:
        output.stderr.print("interrupted")
        code = exitcodes.INTERRUPTED
    except typer.TyperException as error:
        error.show()  # type: ignore[attr-defined]  # Typer declares it on its Click base
        code = error.exit_code
    except typer.Exit as done:
        code = done.exit_code
    sys.exit(code)
