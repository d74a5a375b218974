"""Where the CLI keeps its sign-in: ``$XDG_CONFIG_HOME/gangway/config.json`` (default
``~/.config/gangway/config.json``), a JSON object that only its user may read.

The file holds a bearer credential, so the directory is created 0700 and the file is
written 0600 through a temporary file and a rename (never readable by others, even for a
moment, and never half written). Environment variables win over the file:
``GANGWAY_SERVER`` (the server URL), ``GANGWAY_TOKEN`` (an API token, e.g. in CI) and
``GANGWAY_TENANT``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gangway_cli import exitcodes
from gangway_cli.errors import CliError

ENV_SERVER = "GANGWAY_SERVER"
ENV_TOKEN = "GANGWAY_TOKEN"
ENV_TENANT = "GANGWAY_TENANT"


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/gangway``, or ``~/.config/gangway`` (the XDG default)."""
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    # The XDG spec says to ignore a relative XDG_CONFIG_HOME.
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "gangway"


def config_path() -> Path:
    """The config file itself."""
    return config_dir() / "config.json"


def load() -> dict[str, Any]:
    """The stored config, or ``{}`` when there is none. A file that is not JSON is an
    error naming it (it is the user's to fix or delete, not ours to overwrite)."""
    path = config_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise CliError(
            f"cannot read {path}: {exc}",
            hint=f"delete {path} and run `gangway login` again",
            code=exitcodes.ERROR,
        ) from None
    return data if isinstance(data, dict) else {}


def save(data: dict[str, Any]) -> Path:
    """Write ``data`` as the config, 0600 in a 0700 directory; returns the path."""
    directory = config_dir()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    path = config_path()
    temporary = directory / f".config.json.{os.getpid()}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(data, out, indent=2, sort_keys=True)
            out.write("\n")
        os.chmod(temporary, 0o600)  # O_CREAT's mode is masked by the umask; be explicit
        os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()
    return path


def clear_auth() -> bool:
    """Forget the stored credential (keep the server URL); whether there was one."""
    data = load()
    had = "auth" in data
    data.pop("auth", None)
    if config_path().exists():
        save(data)
    return had


def server_url(explicit: str | None = None, data: dict[str, Any] | None = None) -> str | None:
    """The server: ``--server``, else ``GANGWAY_SERVER``, else the stored one."""
    url = (
        explicit
        or os.environ.get(ENV_SERVER)
        or (data if data is not None else load()).get("server")
    )
    return normalise_url(url) if url else None


def normalise_url(url: str) -> str:
    """``host:8000`` -> ``http://host:8000``; no trailing slash."""
    url = url.strip()
    if "://" not in url:
        url = f"http://{url}" if url.startswith(("127.", "localhost")) else f"https://{url}"
    return url.rstrip("/")
