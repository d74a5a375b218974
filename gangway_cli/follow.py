"""Following a log the API serves as "the last N lines": print only what is new.

The API has no streaming endpoint (docs/jobs.md), so ``--follow`` polls the tail and
prints the lines after the longest overlap between the previous tail and the new one.
"""

from __future__ import annotations


def new_lines(previous: list[str], current: list[str]) -> list[str]:
    """The lines of ``current`` not yet shown, given that ``previous`` was the last tail.

    The new tail is the old one scrolled by some lines with some appended, so the
    longest suffix of ``previous`` that is a prefix of ``current`` is what was seen.
    With no overlap at all (more lines came than the tail holds), all of ``current`` is
    new.
    """
    if not previous:
        return list(current)
    longest = min(len(previous), len(current))
    for size in range(longest, 0, -1):
        if previous[-size:] == current[:size]:
            return current[size:]
    return list(current)
