"""The ``oidc_provider`` fixture: a real OpenID provider (tests/oidc/provider) on loopback.

Every test that asks for ``oidc_provider`` gets a provider process of its own, with its own
database, keys and users, on a free port of 127.0.0.1; it is stopped when the test ends, and
its log (requests and errors) is added to the report of a test that fails. The database is
migrated once per session into a template file that each provider copies, so a provider
starts in about a second.

tests/conftest.py registers this module (``pytest_plugins``), so any test may use the
fixture. ``start_oidc_provider(data_dir, template)`` starts one by hand, e.g. for a fixture
of wider scope.

This module imports nothing of the provider: the provider is a Django project of its own
and only ever runs in its own process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0
WEB_CLIENT_SECRET = "gangway-web-secret"
TEST_CLIENT_SECRET = "gangway-test-secret"
DEFAULT_SCOPE = "openid profile email groups"
_PROVIDER_KEY = pytest.StashKey["OidcProvider"]()


class OidcProvider:
    """A running provider and the calls tests make to it (HTTP only)."""

    web_client_id = "gangway-web"
    web_client_secret = WEB_CLIENT_SECRET
    cli_client_id = "gangway-cli"
    test_client_id = "gangway-test"
    test_client_secret = TEST_CLIENT_SECRET

    def __init__(self, process: subprocess.Popen[bytes], data_dir: Path, port: int) -> None:
        self.process = process
        self.data_dir = data_dir
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}"
        self.issuer = f"{self.base_url}/o"
        self.discovery: dict[str, Any] = {}
        self.http = requests.Session()

    # -- plumbing -------------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return self.data_dir / "provider.log"

    def log(self) -> str:
        """Everything the provider wrote: one line per request, and any traceback."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def control(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """A call of the control API (tests/oidc/provider/control.py); POST unless no body."""
        url = f"{self.base_url}/control/{path}"
        if body is None and path == "keys":
            response = self.http.get(url, timeout=10)
        else:
            response = self.http.post(url, json=body or {}, timeout=10)
        if response.status_code != 200:
            raise AssertionError(f"control {path}: {response.status_code} {response.text}")
        result: dict[str, Any] = response.json()
        return result

    def url(self, path: str) -> str:
        """An absolute URL of the provider, e.g. ``url("/accounts/me/")``."""
        return urljoin(self.base_url, path)

    # -- users, clients, keys, settings ---------------------------------------------------

    def create_user(
        self,
        username: str,
        password: str = "password",
        groups: Sequence[str] = (),
        email: str | None = None,
        name: str | None = None,
        is_active: bool = True,
    ) -> dict[str, Any]:
        """Create (or update) a user; returns ``{sub, username, email, name, groups,
        is_active}``. ``email`` defaults to ``<username>@example.com``."""
        return self.control(
            "users",
            {
                "username": username,
                "password": password,
                "groups": list(groups),
                "email": f"{username}@example.com" if email is None else email,
                "name": name or username.title(),
                "is_active": is_active,
            },
        )

    def set_groups(self, username: str, groups: Sequence[str]) -> dict[str, Any]:
        return self.control(f"users/{username}/groups", {"groups": list(groups)})

    def deactivate(self, username: str) -> dict[str, Any]:
        return self.control(f"users/{username}/deactivate", {})

    def set_redirect_uris(
        self,
        redirect_uris: Sequence[str],
        post_logout_redirect_uris: Sequence[str] = (),
        client_id: str = "gangway-web",
    ) -> dict[str, Any]:
        """Replace the client's redirect URIs (exact match) and post-logout redirect URIs."""
        return self.control(
            f"clients/{client_id}",
            {
                "redirect_uris": list(redirect_uris),
                "post_logout_redirect_uris": list(post_logout_redirect_uris),
            },
        )

    def keys(self) -> dict[str, Any]:
        """``{active_kid, inactive_kids}``."""
        return self.control("keys")

    def rotate_keys(self) -> dict[str, Any]:
        """A new active signing key; the old ones stay in the JWKS. Returns ``keys()``."""
        return self.control("keys/rotate", {})

    def forget_old_keys(self) -> dict[str, Any]:
        """Drop the inactive keys from the JWKS. Returns ``keys()``."""
        return self.control("keys/forget", {})

    def set_audience(self, aud: str) -> None:
        """The ``aud`` of access tokens issued from now on (default ``gangway``)."""
        self.control("settings", {"audience": aud})

    def set_access_token_lifetime(self, seconds: int) -> None:
        """The lifetime of access tokens issued from now on (default 3600)."""
        self.control("settings", {"access_token_lifetime": seconds})

    def jwks(self) -> dict[str, Any]:
        response = self.http.get(self.discovery["jwks_uri"], timeout=10)
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    # -- tokens ---------------------------------------------------------------------------

    def token_request(
        self, data: dict[str, str], auth: tuple[str, str] | None = None
    ) -> requests.Response:
        """A raw POST to the token endpoint, for tests that check a refusal."""
        return self.http.post(self.discovery["token_endpoint"], data=data, auth=auth, timeout=10)

    def password_token(
        self, username: str, password: str = "password", scope: str = DEFAULT_SCOPE
    ) -> dict[str, Any]:
        """Real tokens for the user, from the token endpoint (password grant, gangway-test):
        ``{access_token, refresh_token, expires_in, token_type, scope}``."""
        response = self.token_request(
            {"grant_type": "password", "username": username, "password": password, "scope": scope},
            auth=(self.test_client_id, self.test_client_secret),
        )
        if response.status_code != 200:
            raise AssertionError(f"password grant: {response.status_code} {response.text}")
        result: dict[str, Any] = response.json()
        return result

    def refresh(
        self,
        refresh_token: str,
        client_id: str = "gangway-test",
        client_secret: str | None = TEST_CLIENT_SECRET,
    ) -> requests.Response:
        """A refresh grant; a public client (gangway-cli) passes ``client_secret=None``."""
        data = {"grant_type": "refresh_token", "refresh_token": refresh_token}
        if client_secret is None:
            return self.token_request({**data, "client_id": client_id})
        return self.token_request(data, auth=(client_id, client_secret))

    def mint(self, username: str, **overrides: Any) -> str:
        """An access token signed with the active key, as the token endpoint would issue
        it, then bent. ``exp_offset`` (seconds from now; negative = expired),
        ``nbf_offset``, ``iat_offset``, ``client_id``, ``scope`` and ``header`` (extra JWS
        header fields) shape it; any other keyword replaces that claim (``aud="other"``,
        ``iss="http://evil"``, ``groups=[...]``), and ``None`` removes it."""
        options = {"exp_offset", "nbf_offset", "iat_offset", "client_id", "scope", "header"}
        body: dict[str, Any] = {"username": username, "claims": {}}
        for name, value in overrides.items():
            if name in options:
                body[name] = value
            else:
                body["claims"][name] = value
        return str(self.control("mint", body)["access_token"])

    # -- the browser side -----------------------------------------------------------------

    def login(
        self, session: requests.Session, username: str, password: str = "password"
    ) -> requests.Session:
        """Sign ``session`` in through the provider's login form, as a browser would."""
        login_url = self.url("/accounts/login/")
        session.get(login_url, timeout=10).raise_for_status()
        response = session.post(
            login_url,
            data={
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": session.cookies["csrftoken"],
            },
            allow_redirects=False,
            timeout=10,
        )
        if response.status_code != 302:
            raise AssertionError(f"sign-in of {username} refused ({response.status_code})")
        return session

    def device_approve(self, user_code: str, username: str, password: str = "password") -> None:
        """The user's side of the device flow over plain HTTP: sign in, enter the code,
        accept. The CLI's next poll of the token endpoint then gets its tokens."""
        session = self.login(requests.Session(), username, password)
        device_url = self.url("/o/device/")
        session.get(device_url, timeout=10).raise_for_status()
        response = session.post(
            device_url,
            data={"user_code": user_code, "csrfmiddlewaretoken": session.cookies["csrftoken"]},
            allow_redirects=False,
            timeout=10,
        )
        if response.status_code != 302:
            raise AssertionError(f"user code {user_code} refused ({response.status_code})")
        response = session.post(
            self.url(response.headers["Location"]),
            data={"action": "accept", "csrfmiddlewaretoken": session.cookies["csrftoken"]},
            allow_redirects=False,
            timeout=10,
        )
        if response.status_code != 302:
            raise AssertionError(f"device approval refused ({response.status_code})")

    # -- lifecycle ------------------------------------------------------------------------

    def stop(self) -> None:
        self.http.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def _provider_command(data_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tests.oidc.provider.serve", "--data-dir", str(data_dir), *extra]


def _provider_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DJANGO_SETTINGS_MODULE", None)  # the provider has its own settings
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def prepare_template(directory: Path) -> Path:
    """Migrate and seed a provider database once; returns the file to copy."""
    directory.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        _provider_command(directory, "--prepare"),
        cwd=ROOT,
        env=_provider_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"preparing the OIDC provider failed:\n{result.stdout}{result.stderr}")
    return directory / "provider.sqlite3"


@contextmanager
def start_oidc_provider(data_dir: Path, template: Path | None = None) -> Iterator[OidcProvider]:
    """Run a provider in ``data_dir`` (created; a copy of ``template`` is its database if
    given) until the block ends. Waits until discovery answers."""
    data_dir.mkdir(parents=True, exist_ok=True)
    if template is not None:
        shutil.copyfile(template, data_dir / "provider.sqlite3")
    port_file = data_dir / "port"
    port_file.unlink(missing_ok=True)
    with (data_dir / "provider.log").open("wb") as log:
        process = subprocess.Popen(
            _provider_command(data_dir),
            cwd=ROOT,
            env=_provider_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    provider: OidcProvider | None = None
    try:
        provider = _wait_until_serving(process, data_dir)
        yield provider
    finally:
        if provider is not None:
            provider.stop()
        elif process.poll() is None:
            process.kill()
            process.wait(timeout=5)


def _wait_until_serving(process: subprocess.Popen[bytes], data_dir: Path) -> OidcProvider:
    deadline = time.monotonic() + START_TIMEOUT
    port_file = data_dir / "port"
    provider: OidcProvider | None = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = (data_dir / "provider.log").read_text(errors="replace")
            raise RuntimeError(f"the OIDC provider exited with {process.returncode}:\n{log}")
        if provider is None and port_file.exists():
            provider = OidcProvider(process, data_dir, int(port_file.read_text()))
        if provider is not None:
            url = f"{provider.issuer}/.well-known/openid-configuration"
            try:
                response = provider.http.get(url, timeout=2)
            except requests.ConnectionError:
                response = None
            if response is not None and response.status_code == 200:
                provider.discovery = response.json()
                return provider
        time.sleep(0.05)
    process.kill()
    log = (data_dir / "provider.log").read_text(errors="replace")
    raise RuntimeError(f"the OIDC provider did not answer within {START_TIMEOUT:.0f} s:\n{log}")


@pytest.fixture(scope="session")
def oidc_provider_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated, seeded provider database, made once per session (and per xdist worker)."""
    return prepare_template(tmp_path_factory.mktemp("oidc-provider-template"))


@pytest.fixture
def oidc_provider(
    request: pytest.FixtureRequest, tmp_path: Path, oidc_provider_template: Path
) -> Iterator[OidcProvider]:
    """A real OpenID provider of this test's own; see OidcProvider for what it offers."""
    with start_oidc_provider(tmp_path / "oidc-provider", oidc_provider_template) as provider:
        request.node.stash[_PROVIDER_KEY] = provider
        yield provider


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Add the provider's log to the report of a test that fails."""
    report = yield
    provider = item.stash.get(_PROVIDER_KEY, None)
    if provider is not None and report.failed:
        report.sections.append(("oidc provider log", provider.log() or "(empty)"))
    return report
