"""Run test modules as a suite's core and count what they did.

Several suites are the tests ``make test`` already runs, at larger sizes: the same code
proves the property in both places, and only the knobs (environment variables the test
modules read) differ. This runs pytest in a child process, as ``make test`` does, and
reads its JUnit XML report back: cases run, passed and failed, and what each case
printed (the figures some tests print, such as the schema fuzzer's request counts).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Outcome:
    """What one pytest run did: cases by outcome, printed output, wall time."""

    command: str
    cases: int = 0
    failed: list[str] = field(default_factory=list)
    skipped: int = 0
    output: list[str] = field(default_factory=list)
    seconds: float = 0.0
    returncode: int = 0

    @property
    def passed(self) -> int:
        return self.cases - len(self.failed) - self.skipped

    def verdict(self) -> str:
        if self.returncode not in (0, 5) and not self.failed:
            return f"**pytest exited with {self.returncode}**"
        if self.failed:
            return f"**{len(self.failed)} failed** ({', '.join(self.failed[:5])})"
        return f"all {self.passed} passed"


def run_tests(targets: list[str], env: dict[str, str] | None = None) -> Outcome:
    """``pytest targets`` in a child process with ``env`` added to this one's."""
    report = Path(tempfile.mkdtemp(prefix="gangway-reliability-")) / "junit.xml"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "-n",
        "2",
        "-o",
        "junit_logging=system-out",
        f"--junitxml={report}",
        *targets,
    ]
    knobs = " ".join(f"{k}={v}" for k, v in sorted((env or {}).items()))
    outcome = Outcome(command=f"{knobs} pytest {' '.join(targets)}".strip())
    started = time.monotonic()
    result = subprocess.run(command, cwd=ROOT, env={**os.environ, **(env or {})}, check=False)
    outcome.seconds = time.monotonic() - started
    outcome.returncode = result.returncode
    if not report.exists():
        return outcome
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome.cases += 1
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            outcome.failed.append(name)
        elif case.find("skipped") is not None:
            outcome.skipped += 1
        out = case.find("system-out")
        if out is not None and out.text:
            outcome.output += [line for line in out.text.splitlines() if line.strip()]
    return outcome
