"""API abuse: the schema fuzzer as every role, the access matrix, mass assignment,
hostile cluster and job requests, and the password lockout.

Each part is a test module ``make test`` runs at a small size (the schema fuzzer,
``tests/access/``, ``tests/reliability/test_abuse.py``, the sign-in lockout tests); this
runs them in a child pytest (``reliability.pytest_run``) at the sizes docs/reliability.md
reports, and says there what each part did and found.
"""

from __future__ import annotations

import ast
import re

from benchmarks import support
from reliability.pytest_run import Outcome, run_tests

ACTORS = "platform,admin,engineer,viewer,outsider"


def _fuzz_figures(outcome: Outcome) -> tuple[int, dict[str, int]]:
    """Requests the fuzzer made and their statuses, from the lines it prints."""
    total, statuses = 0, dict[str, int]()
    for line in outcome.output:
        match = re.match(r"(\d+) requests, by status: (\{.*\})", line)
        if match:
            total += int(match.group(1))
            for status, count in ast.literal_eval(match.group(2)).items():
                statuses[status] = statuses.get(status, 0) + count
    return total, dict(sorted(statuses.items()))


def run(quick: bool) -> str:
    """The abuse figures as a markdown section (``quick``: the sizes ``make test`` uses)."""
    examples, scenarios = ("5", "6") if quick else ("100", "50")
    fuzz_env = {
        "SCHEMA_FUZZ_EXAMPLES": examples,
        "SCHEMA_FUZZ_NEGATIVE_EXAMPLES": str(max(2, int(examples) // 4)),
        "SCHEMA_FUZZ_SCENARIOS": scenarios,
        "SCHEMA_FUZZ_ACTORS": ACTORS,
    }
    fuzz = run_tests(
        [
            "tests/controlplane/test_schema_fuzz.py::test_every_operation_conforms_to_the_schema",
            "tests/controlplane/test_schema_fuzz.py::test_chained_operations_conform_to_the_schema",
            "tests/controlplane/test_schema_fuzz.py::test_head_and_options_of_every_path_never_fail",
        ],
        fuzz_env,
    )
    requests, statuses = _fuzz_figures(fuzz)
    server_errors = sum(count for status, count in statuses.items() if int(status) >= 500)
    matrix = run_tests(["tests/access/test_route_matrix.py", "tests/access/test_options_head.py"])
    sweeps = run_tests(
        [
            "tests/access/test_bodies.py",
            "tests/access/test_credentials.py",
            "tests/access/test_formats.py",
            "tests/access/test_paths.py",
            "tests/access/test_query_params.py",
        ]
    )
    abuse = run_tests(["tests/reliability/test_abuse.py"])
    lockout = run_tests(["tests/tenants/test_sign_in_abuse.py"])
    from tests.reliability.test_abuse import HOSTILE, PROTECTED

    mass = [c for c in abuse.failed if "mass_assigned" in c]
    hostile = [c for c in abuse.failed if "hostile" in c]
    rows = [
        "| part | what was done | result |",
        "|---|---|---|",
        f"| schema fuzz, stateful | {requests:,} requests as {ACTORS.count(',') + 1} roles "
        f"({ACTORS.replace(',', ', ')}): {examples} valid and "
        f"{fuzz_env['SCHEMA_FUZZ_NEGATIVE_EXAMPLES']} invalid examples per operation and "
        f"role, {scenarios} chained scenarios per role; statuses {statuses} | "
        f"**{server_errors} server errors**; responses outside the schema: "
        f"{'none' if not fuzz.failed else 'see failures'} ({fuzz.verdict()}) |",
        f"| access matrix | {matrix.cases:,} cases: every route x method x actor (anonymous, "
        "a user of another tenant, viewer, engineer, tenant admin, platform admin), each "
        "on the own tenant's objects and, for the outsider, on another tenant's | "
        f"cases not as the table says (a cross-tenant read or write would be one): "
        f"**{len(matrix.failed)}** ({matrix.verdict()}) |",
        f"| hostile bodies, unknown keys, credentials, formats, paths, query parameters | "
        f"{sweeps.cases:,} cases over every API route | {sweeps.verdict()} |",
        f"| mass assignment | {len(PROTECTED)} protected fields (owner, tenant, state, "
        "holds_gpus, is_staff, source, ...) added to every API write route's valid body | "
        f"applied: **{len(mass)}** ({mass or 'each refused by name, nothing written'}) |",
        f"| hostile cluster and job requests | {len(HOSTILE)} (privileged, hostPath, host "
        "network, NVIDIA_VISIBLE_DEVICES=all, images off the allow-list, NodePort, absurd "
        "sizes, unicode and overlong names, injection strings, deep nesting) | "
        f"not a clear 400 or wrote a row: **{len(hostile)}** |",
        f"| password guessing | {lockout.cases} cases over the API token endpoint (the CLI's "
        "sign-in), the dashboard login and the admin login: lockout per account and per "
        "address, shared between doors and processes, audited | "
        f"{lockout.verdict()} |",
    ]
    outcomes = [fuzz, matrix, sweeps, abuse, lockout]
    return "\n".join(
        [
            "## API abuse",
            "",
            "`python -m reliability abuse` runs the test modules below at these sizes, in "
            "process against the real PostgreSQL (each request rolled back to the fixture). "
            "A request that leaves no row cannot reach Kubernetes: manifests are rendered "
            "from rows only.",
            "",
            *rows,
            "",
            "Commands: " + "; ".join(f"`{o.command}` ({o.seconds:.0f} s)" for o in outcomes) + ".",
            "",
            support.load_line(),
        ]
    )
