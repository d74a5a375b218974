"""The exit codes every command shares, in one place (docs/cli.md lists them with the
kinds' own: :data:`gangway_cli.kinds.EXIT_CODES`).

Scripts branch on these, so a code never changes meaning once shipped.
"""

from __future__ import annotations

OK = 0
ERROR = 1  # anything not below: a server error, an unexpected answer
USAGE = 2  # a bad option or argument (Click's own code for usage errors)
AUTH = 3  # not signed in, or the token expired or was revoked
NOT_FOUND = 4  # no such cluster, job or tenant (for you)
REFUSED = 5  # the server refused the request: a rule, a role, a conflict, throttling
NEVER_FITS = 6  # the request could never be admitted (quota, fleet)
# 7 is a kind's own (gangway_cli.kinds.EXIT_CODES): never reused here.
UNREACHABLE = 8  # the server did not answer (wrong URL, down, network)
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)

TABLE: list[tuple[int, str]] = [
    (OK, "success"),
    (ERROR, "unexpected error (a server error, an answer the CLI does not understand)"),
    (USAGE, "bad usage: an unknown option, a malformed value, no tenant chosen"),
    (AUTH, "not signed in, or the token expired or was revoked: run `gangway login`"),
    (NOT_FOUND, "no such cluster, job or tenant"),
    (REFUSED, "refused by the server: invalid request, missing role, conflict, throttled"),
    (NEVER_FITS, "the request can never fit (quota or fleet); the reason is printed"),
    (UNREACHABLE, "the server could not be reached"),
    (INTERRUPTED, "interrupted with Ctrl-C"),
]
