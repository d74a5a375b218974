"""``login``, ``logout`` and ``whoami``.

``login`` exchanges a username and password for an API token (``POST
/api/v1/auth/token/``), or, when the server has SSO (``GET /api/v1/auth/sso/``) and no
username is given, runs the device flow of :mod:`gangway_cli.sso`. The credential goes
into the config file (0600); ``logout`` revokes an API token on the server
(``DELETE /api/v1/auth/token/``) and forgets it.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.markup import escape

from gangway_cli import config, exitcodes, output, sso
from gangway_cli.app import OutputOpt, ServerOpt, app, session, set_mode
from gangway_cli.client import ApiClient
from gangway_cli.errors import CliError


def _server(ctx: typer.Context, option: str | None) -> str:
    top = ctx.find_root().obj
    url = config.server_url(option or getattr(top, "server", None))
    if not url:
        raise CliError(
            "which server? no URL given",
            hint=f"run `gangway login --server https://gangway.example.com` (or set "
            f"{config.ENV_SERVER})",
            code=exitcodes.USAGE,
        )
    return url


def _interactive() -> bool:
    return sys.stdin.isatty()


def _password(password_stdin: bool) -> str:
    if password_stdin:
        secret = sys.stdin.readline().rstrip("\r\n")
        if not secret:
            raise CliError("no password on stdin", code=exitcodes.USAGE)
        return secret
    if not _interactive():
        raise CliError(
            "no terminal to ask the password on",
            hint="pipe it in with --password-stdin",
            code=exitcodes.USAGE,
        )
    return str(typer.prompt("Password", hide_input=True, err=True))


def _device_flow(server: str, settings: sso.SsoConfig) -> dict[str, Any]:
    device = sso.start(settings)
    output.stderr.print(
        f"To sign in, open [bold]{escape(device.verification_uri_complete)}[/]\n"
        f"and check that it shows the code [bold]{escape(device.user_code)}[/]. "
        "Waiting for your approval...",
        highlight=False,
    )
    tokens = sso.poll(settings, device)
    return {
        "kind": "oidc",
        **tokens,
        "issuer": settings.issuer,
        "client_id": settings.client_id,
        "token_endpoint": settings.token_endpoint,
        "revocation_endpoint": settings.revocation_endpoint,
    }


@app.command()
def login(
    ctx: typer.Context,
    server: ServerOpt = None,
    username: Annotated[
        str | None, typer.Option("--username", "-u", help="Sign in with this username.")
    ] = None,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from stdin.")
    ] = False,
    use_sso: Annotated[
        bool, typer.Option("--sso", help="Sign in through the identity provider (device flow).")
    ] = False,
    output_option: OutputOpt = None,
) -> None:
    """Sign in and keep the credential in your config directory (0600).

    With SSO configured on the server and no --username, opens the identity provider's
    device flow; otherwise asks for a username and password.
    """
    mode = set_mode(ctx, output_option)
    url = _server(ctx, server)
    anonymous = ApiClient(url, None)
    settings = None if username else sso.discover(anonymous.session, url)
    if use_sso and settings is None:
        raise CliError(
            f"{url} has no single sign-on configured",
            hint="sign in with --username (and your password)",
            code=exitcodes.USAGE,
        )
    if settings is not None:
        auth = _device_flow(url, settings)
    else:
        if not username:
            if not _interactive():
                raise CliError(
                    "no username given", hint="pass --username NAME", code=exitcodes.USAGE
                )
            username = str(typer.prompt("Username", err=True))
        answer = anonymous.post(
            "/api/v1/auth/token/",
            {"username": username, "password": _password(password_stdin)},
            anonymous=True,
        )
        auth = {
            "kind": "token",
            "token": answer["token"],
            "username": answer.get("username", username),
            "expiry": answer.get("expiry"),
        }
    data = config.load()
    if data.get("server") != url:
        data.pop("tenant", None)  # a default tenant is a server's
    data.update(server=url, auth=auth)
    path = config.save(data)

    def keep(refreshed: dict[str, Any]) -> None:
        # A provider that rotates refresh tokens has revoked the one just stored.
        config.save({**data, "auth": refreshed})

    me = ApiClient(url, auth, save_auth=keep).get("/api/v1/users/me/")
    if mode == output.JSON:
        output.print_json(me)
        return
    tenants = ", ".join(f"{m['tenant']} ({m['role']})" for m in me.get("memberships", []))
    output.stdout.print(
        f"Signed in to {escape(url)} as [bold]{escape(me['username'])}[/]"
        + (f" - tenants: {escape(tenants)}" if tenants else "")
    )
    expiry = auth.get("expiry")
    if expiry:
        output.stderr.print(f"The token expires {output.when(expiry)}; kept in {path}.")


@app.command()
def logout(ctx: typer.Context, output_option: OutputOpt = None) -> None:
    """Revoke your API token (or your identity provider's refresh token) and forget it."""
    mode = set_mode(ctx, output_option)
    data = config.load()
    auth = data.get("auth")
    server = data.get("server")
    revoked = False
    if isinstance(auth, dict) and auth.get("kind") == "token" and server:
        try:
            ApiClient(server, auth).delete("/api/v1/auth/token/")
            revoked = True
        except CliError as error:
            # Already expired or revoked, or the server is away: forget it all the same.
            output.stderr.print(f"note: the server did not revoke the token ({error.message})")
    elif isinstance(auth, dict) and auth.get("kind") == "oidc" and auth.get("refresh_token"):
        endpoint = auth.get("revocation_endpoint")
        if endpoint:
            try:
                revoked = sso.revoke(endpoint, auth["client_id"], auth["refresh_token"])
            except CliError as error:
                output.stderr.print(f"note: the provider did not revoke it ({error.message})")
    had = config.clear_auth()
    if mode == output.JSON:
        output.print_json({"server": server, "signed_out": had, "revoked": revoked})
    elif had:
        output.stdout.print(f"Signed out of {server}" + (" (token revoked)" if revoked else ""))
    else:
        output.stdout.print("Not signed in.")


@app.command()
def whoami(ctx: typer.Context, output_option: OutputOpt = None) -> None:
    """Who you are on the server, your tenants and your role in each."""
    s = session(ctx, output_option)
    me = s.me()

    def show() -> None:
        staff = " (platform admin)" if me.get("is_staff") else ""
        output.stdout.print(
            f"[bold]{escape(me['username'])}[/]{staff} on {escape(s.client.server)}"
        )
        rows = [(m["tenant"], m["tenant_name"], m["role"]) for m in me.get("memberships", [])]
        output.stdout.print(output.table(["TENANT", "NAME", "ROLE"], rows))

    output.emit(s.mode, me, show)
