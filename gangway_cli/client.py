"""The HTTP client: every request to the API goes through :class:`ApiClient`.

It adds the credential (``Authorization: Token <key>`` for an API token, ``Bearer
<access token>`` after SSO, refreshed when it expires or is refused), follows the API's
pagination for lists, and turns every failure into a :class:`~gangway_cli.errors.CliError`
in one place: error bodies through :func:`~gangway_cli.errors.from_response`, and a
server that does not answer into a message naming it and how to point elsewhere.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import requests

from gangway_cli import __version__, config, exitcodes, sso
from gangway_cli.errors import CliError, from_response

TIMEOUT = 30.0
PAGE_SIZE = 500  # the API's largest page


class ApiClient:
    """A signed-in (or anonymous) client of one gangway server."""

    def __init__(
        self,
        server: str,
        auth: dict[str, Any] | None,
        *,
        save_auth: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.server = server
        self.auth = auth
        self._save_auth = save_auth
        self.session = requests.Session()
        self.session.headers["User-Agent"] = f"gangway-cli/{__version__}"

    # -- credentials -----------------------------------------------------------------

    def _authorization(self) -> dict[str, str]:
        if not self.auth:
            return {}
        if self.auth.get("kind") == "oidc":
            expires_at = self.auth.get("expires_at")
            # Refresh a little early so that a token does not expire in flight.
            if expires_at is not None and float(expires_at) < time.time() + 30:
                self._refresh()
            return {"Authorization": f"Bearer {self.auth['access_token']}"}
        return {"Authorization": f"Token {self.auth['token']}"}

    def _refresh(self) -> bool:
        """Refresh an SSO access token; whether that worked."""
        auth = self.auth or {}
        if auth.get("kind") != "oidc" or not auth.get("refresh_token"):
            return False
        tokens = sso.refresh(auth["token_endpoint"], auth["client_id"], auth["refresh_token"])
        if tokens is None:
            return False
        self.auth = {**auth, **tokens}
        if self._save_auth is not None:
            self._save_auth(self.auth)
        return True

    # -- requests --------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        accept: str = "application/json",
        what: str = "",
        anonymous: bool = False,
    ) -> Any:
        """The answer's body (parsed JSON, or text for a non-JSON ``accept``; None for an
        empty body). ``what`` names the object for a 404's message."""
        response = self._send(method, path, json=json, params=params, accept=accept, anon=anonymous)
        if response.status_code == 401 and not anonymous and self._refresh():
            response = self._send(method, path, json=json, params=params, accept=accept, anon=False)
        if response.status_code >= 400:
            if response.status_code == 401 and not self.auth:
                raise CliError(
                    f"not signed in to {self.server}",
                    hint=f"run `gangway login --server {self.server}` (or set GANGWAY_TOKEN)",
                    code=exitcodes.AUTH,
                )
            raise from_response(
                response.status_code, _body(response), server=self.server, what=what
            )
        if not response.content:
            return None
        if accept != "application/json":
            return response.text
        return _body(response)

    def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any,
        params: dict[str, Any] | None,
        accept: str,
        anon: bool,
    ) -> requests.Response:
        url = path if path.startswith("http") else f"{self.server}{path}"
        headers = {"Accept": accept, **({} if anon else self._authorization())}
        try:
            return self.session.request(
                method, url, json=json, params=params, headers=headers, timeout=TIMEOUT
            )
        except requests.RequestException as exc:
            raise CliError(
                f"cannot reach the gangway server at {self.server} ({type(exc).__name__})",
                hint="check the URL and your network; set it with --server URL or "
                f"{config.ENV_SERVER}=URL",
                code=exitcodes.UNREACHABLE,
            ) from None

    def get(self, path: str, **kwargs: Any) -> Any:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Any:
        return self.request("POST", path, json=body, **kwargs)

    def patch(self, path: str, body: Any = None, **kwargs: Any) -> Any:
        return self.request("PATCH", path, json=body, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Any:
        return self.request("DELETE", path, **kwargs)

    def get_all(self, path: str, params: dict[str, Any] | None = None) -> list[Any]:
        """Every item of a paginated list, following ``next`` to the last page."""
        items: list[Any] = []
        page: Any = self.get(path, params={**(params or {}), "page_size": PAGE_SIZE})
        while True:
            if isinstance(page, list):  # an unpaginated list
                return items + page
            items.extend(page.get("results", []))
            following = page.get("next")
            if not following:
                return items
            page = self.get(following)


def _body(response: requests.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def connect(server_option: str | None, *, signed_in: bool = True) -> ApiClient:
    """The client for the chosen server with the stored (or ``GANGWAY_TOKEN``)
    credential. ``signed_in`` requires one, failing with what to run."""
    data = config.load()
    server = config.server_url(server_option, data)
    if not server:
        raise CliError(
            "no gangway server chosen",
            hint=f"run `gangway login --server URL`, or set {config.ENV_SERVER}=URL",
            code=exitcodes.AUTH if signed_in else exitcodes.USAGE,
        )
    token = os.environ.get(config.ENV_TOKEN)
    auth: dict[str, Any] | None
    if token:
        auth = {"kind": "token", "token": token}
    else:
        stored = data.get("auth")
        # A credential is for the server it was issued by, never sent elsewhere.
        same = isinstance(stored, dict) and data.get("server") == server
        auth = stored if same else None
    if signed_in and not auth:
        raise CliError(
            f"not signed in to {server}",
            hint=f"run `gangway login --server {server}` (or set {config.ENV_TOKEN})",
            code=exitcodes.AUTH,
        )

    def save_auth(new: dict[str, Any]) -> None:
        current = config.load()
        current["auth"] = new
        config.save(current)

    return ApiClient(server, auth, save_auth=None if token else save_auth)
