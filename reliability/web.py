"""Web hardening: ``check --deploy``, the security headers on every response, CSRF on
every state-changing request, and every page in Chromium under the CSP.

Each part is a test ``make test`` runs; this runs them in a child pytest
(``reliability.pytest_run``) and reports in docs/reliability.md what they covered.
"""

from __future__ import annotations

from benchmarks import support
from reliability.pytest_run import run_tests


def run(quick: bool) -> str:
    """The web hardening figures as a markdown section (the same tests either way: they
    are sweeps of every route, with no size to turn down)."""
    deploy = run_tests(["tests/reliability/test_web.py::test_check_deploy_is_clean"])
    headers = run_tests(
        ["tests/access/test_route_matrix.py", "tests/controlplane/test_security_headers.py"]
    )
    csrf = run_tests(
        [
            "tests/reliability/test_web.py::test_a_state_changing_request_without_a_csrf_token"
            "_is_refused"
        ]
    )
    browser = run_tests(["tests/frontend/test_csp.py"])
    rows = [
        "| part | what was done | result |",
        "|---|---|---|",
        "| `check --deploy` | production settings (DEBUG off, TLS switches on, a shared "
        f"Redis cache), static files collected, warnings fail | {deploy.verdict()} |",
        f"| security headers | {headers.cases:,} responses: every route x method x actor "
        "of the access tables plus probes, schema, docs and errors; each must carry the "
        "CSP (no unsafe-inline, no unsafe-eval, frame-ancestors and object-src none) and "
        f"the Permissions-Policy | {headers.verdict()} |",
        f"| CSRF | {csrf.cases} state-changing routes (dashboard forms and API writes) "
        "sent with a session and no token | changed something or not refused: "
        f"**{len(csrf.failed)}** ({csrf.verdict()}) |",
        f"| CSP in Chromium | {browser.cases} pages and journeys rendered; a violation, a "
        f"policy console message or a page error fails | {browser.verdict()} "
        f"({browser.skipped} skipped) |",
    ]
    outcomes = [deploy, headers, csrf, browser]
    return "\n".join(
        [
            "## Web hardening",
            "",
            "`python -m reliability web` runs these tests against the real PostgreSQL.",
            "",
            *rows,
            "",
            "Commands: " + "; ".join(f"`{o.command}` ({o.seconds:.0f} s)" for o in outcomes) + ".",
            "",
            support.load_line(),
        ]
    )
