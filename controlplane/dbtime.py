"""Timestamps read from PostgreSQL by psycopg's C loader instead of Django's Python one.

With ``USE_TZ`` Django registers on every connection a ``timestamptz`` loader built on
psycopg's pure-Python one, slow on the reconciler's reads of thousands of rows. The
session's ``TimeZone`` is UTC, so psycopg's C loader returns the very same values:
:func:`use_c_timestamp_loader` registers it on each new connection when both hold. The
class carries the ``timezone`` attribute Django compares when it makes a cursor, so
Django does not register its own loader again per cursor.
"""

from __future__ import annotations

import datetime
import functools
from typing import Any

from psycopg.adapt import Loader


@functools.cache
def _c_loader() -> Any:
    """psycopg's C ``timestamptz`` text loader, or ``None`` without psycopg's binary
    package (the pure-Python installation)."""
    try:
        from psycopg_binary import _psycopg
    except ImportError:
        return None
    return _psycopg.TimestamptzLoader  # type: ignore[attr-defined]


class UtcTimestamptzLoader(Loader):
    """Loads ``timestamptz`` text with psycopg's C loader, in a UTC session."""

    timezone = datetime.UTC

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        # The C loader's bound method itself: psycopg looks ``load`` up per column, not
        # per value, so no Python frame runs per timestamp.
        self.load = _c_loader()(oid, context).load  # type: ignore[method-assign]

    def load(self, data: Any) -> Any:  # pragma: no cover - replaced per instance
        raise NotImplementedError


def use_c_timestamp_loader(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: on a PostgreSQL connection whose session and
    Django both use UTC, read ``timestamptz`` with :class:`UtcTimestamptzLoader`."""
    if connection.vendor != "postgresql" or _c_loader() is None:
        return
    if connection.timezone != datetime.UTC:
        return
    raw = connection.connection
    if raw.info.parameter_status("TimeZone") != "UTC":
        return
    raw.adapters.register_loader("timestamptz", UtcTimestamptzLoader)
