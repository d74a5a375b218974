"""A change the what-if planner tries, and its error for people (``services``)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


class WhatIfError(ValueError):
    """A change or a period the planner cannot use, with a message for people."""


@dataclass(frozen=True)
class Change:
    """One change to the world (the syntax: :mod:`clusters.whatif.services`)."""

    what: str
    name: str
    flavor: str
    value: Decimal
    relative: bool
    text: str
    # A topology change's level, a requeue's or notice:off's word, as written.
    level: str = ""
