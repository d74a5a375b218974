"""The one error type commands raise, and the translation of API error bodies into it.

Every failure reaches the user as one line saying what went wrong and one saying what
to do, and leaves with an exit code of :mod:`gangway_cli.exitcodes`. The API answers
errors as ``{"error": {"code", "message", "fields"?}}`` (controlplane/api/errors.py);
anything else (an HTML page from a proxy, an empty body) is described by its status.
"""

from __future__ import annotations

from typing import Any

from gangway_cli import exitcodes


class CliError(Exception):
    """A failure to report: ``message`` (what happened), ``hint`` (what to do), and the
    process's exit ``code``. ``body`` is the API's error body when there was one, which
    ``--output json`` prints as it came."""

    def __init__(
        self,
        message: str,
        *,
        hint: str = "",
        code: int = exitcodes.ERROR,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code
        self.body = body


def error_fields(body: Any) -> tuple[str, str, dict[str, list[str]]]:
    """``(code, message, fields)`` of an API error body; empty strings when it is not one."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        fields = error.get("fields") if isinstance(error.get("fields"), dict) else {}
        return str(error.get("code", "")), str(error.get("message", "")), fields or {}
    return "", "", {}


def _auth_hint(server: str) -> str:
    return f"run `gangway login --server {server}` to sign in again"


# What to do about a refusal, by status; any other 4xx gets the general hint.
_REFUSAL_HINTS = {
    403: "your role in this tenant does not allow it; `gangway whoami` shows your roles",
    409: "it clashes with what exists now; `gangway ls` and `gangway status NAME` show it",
    429: "wait a moment and try again",
}
_REFUSAL_HINT = "fix the request and try again (`gangway COMMAND --help` lists the options)"


def from_response(status: int, body: Any, *, server: str, what: str = "") -> CliError:
    """The :class:`CliError` for an HTTP error answer of the API.

    ``what`` names the object the request was about ("cluster 'x' in tenant 'y'"), so
    that a 404 can say what was not found.
    """
    code, message, _fields = error_fields(body)
    message = message or f"the server answered HTTP {status}"
    if status == 401:
        return CliError(
            "your sign-in is no longer valid (the token expired or was revoked)"
            if code in ("authentication_failed", "")
            else f"not signed in: {message}",
            hint=_auth_hint(server),
            code=exitcodes.AUTH,
            body=body,
        )
    if status == 404:
        subject = f"{what} was not found" if what else message
        return CliError(
            subject,
            hint="check the name (`gangway ls`, `gangway job ls`) and the tenant (--tenant)",
            code=exitcodes.NOT_FOUND,
            body=body,
        )
    if code == "never_fits":
        return CliError(
            message,
            hint="ask for less, another flavor (--flavor), or a larger quota",
            code=exitcodes.NEVER_FITS,
            body=body,
        )
    if 400 <= status < 500:
        return CliError(
            message,
            hint=_REFUSAL_HINTS.get(status, _REFUSAL_HINT),
            code=exitcodes.REFUSED,
            body=body,
        )
    return CliError(
        f"the server failed ({message})",
        hint=f"try again; if it persists, tell the platform team running {server}",
        code=exitcodes.ERROR,
        body=body,
    )
