"""``gangway login`` through the identity provider's device flow, end to end: the real
CLI as a subprocess, the live server with single sign-on on, and the real provider of
tests/oidc. The engineer approves the code at the provider (over HTTP, as a browser
would); the CLI then holds the provider's tokens, calls the API with them, and refreshes
the access token by itself when it expires.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import ROOT
from tests.tenants.sso.conftest import sso_settings

pytestmark = pytest.mark.django_db(transaction=True)


def test_login_with_the_device_flow_then_the_api_then_a_refresh(
    cli: Any, live_server: Any, config_home: Path, settings: Any, oidc_provider: Any, acme: Any
) -> None:
    sso_settings(settings, oidc_provider)
    settings.OIDC_CLOCK_SKEW_SECONDS = 0  # an expired token is refused at once
    oidc_provider.create_user("ann", groups=["gpu-acme-engineers"])
    oidc_provider.set_access_token_lifetime(2)  # so that the CLI must refresh below

    environment = {k: v for k, v in os.environ.items() if not k.startswith("GANGWAY_")}
    environment.update(
        XDG_CONFIG_HOME=str(config_home), GANGWAY_SERVER=live_server.url, COLUMNS="200"
    )
    login = subprocess.Popen(
        [sys.executable, "-m", "gangway_cli", "login", "--sso"],
        cwd=ROOT,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        shown = ""
        assert login.stdout is not None
        while "code" not in shown or not re.search(r"code (\S+)\.", shown):
            line = login.stdout.readline()
            assert line, f"login ended before showing a code:\n{shown}"
            shown += line
        user_code = re.search(r"code (\S+)\.", shown).group(1)  # type: ignore[union-attr]
        assert oidc_provider.base_url in shown  # where to approve it
        oidc_provider.device_approve(user_code, "ann")
        rest, _ = login.communicate(timeout=60)
    finally:
        if login.poll() is None:
            login.kill()
    assert login.returncode == 0, shown + rest
    stored = json.loads((config_home / "gangway" / "config.json").read_text())
    assert oct((config_home / "gangway" / "config.json").stat().st_mode & 0o777) == "0o600"
    assert "ann" in shown + rest

    me = cli("whoami", "-o", "json")
    assert me.code == 0, me
    assert me.json()["username"] == "ann"
    assert me.json()["memberships"][0]["source"] == "provider"

    time.sleep(3)  # the 2-second access token has expired: the CLI refreshes it
    listed = cli("ls", "--tenant", "acme", "-o", "json")
    assert listed.code == 0, listed
    assert listed.json() == []
    after = json.loads((config_home / "gangway" / "config.json").read_text())
    assert after != stored  # the refreshed token was saved

    # Leaving the group at the provider: the next call is refused the tenant.
    oidc_provider.set_groups("ann", [])
    time.sleep(3)
    gone = cli("ls", "--tenant", "acme")
    assert gone.code == 4, gone

    # Signing out revokes the refresh token at the provider and forgets the tokens.
    refresh_token = json.loads((config_home / "gangway" / "config.json").read_text())["auth"][
        "refresh_token"
    ]
    out = cli("logout", "-o", "json")
    assert out.code == 0 and out.json()["revoked"] is True, out
    refused = oidc_provider.refresh(
        refresh_token, client_id=oidc_provider.cli_client_id, client_secret=None
    )
    assert refused.status_code == 400, refused.text
    assert cli("whoami").code == 3
