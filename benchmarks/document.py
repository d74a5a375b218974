"""The generated documents, ``docs/benchmarks.md`` and ``docs/reliability.md``.

One section per module, each behind a marker comment naming the module, so that running
one benchmark or suite (``python -m benchmarks api``) rewrites its own section and keeps
the others' figures. A section written by a run ends with the command and the time of
that run, since sections of one document may then come from different runs.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

_MARK = "<!-- section: {} -->"
_MARK_RE = re.compile(r"^<!-- section: ([\w.]+) -->$", re.MULTILINE)


def stamp(section: str, command: str) -> str:
    """``section`` with the line that says which run wrote it, and when."""
    when = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    return f"{section.strip()}\n\n_Written by `{command}` on {when}._"


def read_sections(path: Path) -> dict[str, str]:
    """The sections of the document at ``path`` by module name (none if it has no markers)."""
    if not path.exists():
        return {}
    text = path.read_text()
    marks = list(_MARK_RE.finditer(text))
    ends = [m.start() for m in marks[1:]] + [len(text)] if marks else []
    return {m.group(1): text[m.end() : end].strip() for m, end in zip(marks, ends, strict=True)}


def write_document(path: Path, header: str, fresh: dict[str, str], order: list[str]) -> None:
    """Write ``header`` and the sections in ``order``: ``fresh`` ones replace what the
    document had for their module; the rest are kept as they were."""
    sections = {**read_sections(path), **fresh}
    body = "\n\n".join(f"{_MARK.format(m)}\n{sections[m]}" for m in order if m in sections)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{header.strip()}\n\n{body}\n")
