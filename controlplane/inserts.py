"""A new row and the rows that name it, inserted in one statement.

A create writes its row, the row's first event and the audit record of who asked it:
three INSERTs, each a round trip to the database, parsed and planned apart. On PostgreSQL
:func:`insert_together` sends them as one statement, whose data-modifying ``WITH``
clauses insert the row and hand its new primary key to the others; elsewhere (SQLite
under ``make run``) it runs one INSERT each. Either way every instance ends as ``save()``
leaves a new one: its primary key and returned columns set, its state saved, and
``pre_save`` and ``post_save`` sent (a notable ClusterEvent kicks the notification
dispatcher through ``post_save``). Django's foreign keys on PostgreSQL are checked at
commit, so the followers may name the row inserted beside them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connections, router
from django.db.models import Field, Model, signals
from django.db.models.expressions import RawSQL
from django.db.models.sql import InsertQuery

ROW = "new_row"
TEXT_TYPES = ("CharField", "TextField", "SlugField")


def insert_together(row: Model, followers: Sequence[tuple[Model, str]]) -> None:
    """Insert the new ``row``, then each follower with its field named beside it set to
    ``row``'s new primary key (as text for a text field), in the caller's transaction:
    an error of any of them leaves none written."""
    using = router.db_for_write(type(row), instance=row)
    _check_new(row, "")
    for obj, name in followers:
        _check_new(obj, name)
    for obj in (row, *(f for f, _ in followers)):
        signals.pre_save.send(
            sender=type(obj), instance=obj, raw=False, using=using, update_fields=None
        )
    if connections[using].vendor == "postgresql":
        _insert_as_one(row, followers, using)
    else:
        _insert(row, using)
        for obj, name in followers:
            _link(obj, name, row)
            _insert(obj, using)
    for obj in (row, *(f for f, _ in followers)):
        obj._state.adding = False
        obj._state.db = using
        signals.post_save.send(
            sender=type(obj), instance=obj, created=True, update_fields=None, raw=False, using=using
        )


def _check_new(obj: Model, link: str) -> None:
    """A new row with a serial key, or (a follower) one whose key is its link to the row."""
    meta = obj._meta
    keyed_by_link = bool(link) and meta.pk.name == link
    if meta.parents or obj.pk is not None or not (meta.auto_field or keyed_by_link):
        raise ValueError(f"{meta.label}: only a new row keyed by a serial or by its link")


def _columns(obj: Model) -> list[Any]:
    """The columns an INSERT of ``obj`` writes: all but a serial key (as ``save()``)."""
    meta = obj._meta
    return [f for f in meta.local_concrete_fields if not f.generated and f is not meta.auto_field]


def _compiled(obj: Model, using: str) -> tuple[str, tuple[Any, ...], Any]:
    """The INSERT of ``obj`` (all its columns but the serial key) with ``RETURNING``
    the columns ``save()`` reads back, its parameters and its compiler."""
    meta = obj._meta
    query = InsertQuery(type(obj))
    query.insert_values(_columns(obj), [obj])
    compiler = query.get_compiler(using=using)
    compiler.returning_fields = meta.db_returning_fields
    [(sql, params)] = compiler.as_sql()
    return sql, tuple(params), compiler


def _insert(obj: Model, using: str) -> None:
    meta = obj._meta
    query = InsertQuery(type(obj))
    query.insert_values(_columns(obj), [obj])
    returned = query.get_compiler(using=using).execute_sql(meta.db_returning_fields)
    for value, field in zip(returned[0] if returned else (), meta.db_returning_fields, strict=True):
        setattr(obj, field.attname, value)


def _insert_as_one(row: Model, followers: Sequence[tuple[Model, str]], using: str) -> None:
    key = connections[using].ops.quote_name(row._meta.pk.column)
    clauses: list[str] = []
    params: list[Any] = []
    compilers: list[Any] = []
    sql, row_params, compiler = _compiled(row, using)
    clauses.append(f"{ROW} AS ({sql})")
    params.extend(row_params)
    compilers.append(compiler)
    for i, (obj, name) in enumerate(followers):
        field = _field(obj, name)
        cast = "::text" if field.get_internal_type() in TEXT_TYPES else ""
        setattr(obj, field.attname, RawSQL(f"(SELECT {key}{cast} FROM {ROW})", ()))
        sql, obj_params, compiler = _compiled(obj, using)
        clauses.append(f"follower_{i} AS ({sql})")
        params.extend(obj_params)
        compilers.append(compiler)
    # A clause that returns nothing (a follower keyed by its link) cannot be selected from.
    names = [ROW] + [
        f"follower_{i}" for i, (obj, _) in enumerate(followers) if obj._meta.db_returning_fields
    ]
    statement = f"WITH {', '.join(clauses)} SELECT * FROM {', '.join(names)}"
    with connections[using].cursor() as cursor:
        cursor.execute(statement, params)
        returned = cursor.fetchone()
    start = 0
    for obj, compiler in zip((row, *(f for f, _ in followers)), compilers, strict=True):
        fields = obj._meta.db_returning_fields
        if not fields:
            continue
        values = [tuple(returned[start : start + len(fields)])]
        start += len(fields)
        cols = [f.get_col(obj._meta.db_table) for f in fields]
        converters = compiler.get_converters(cols)
        if converters:
            values = list(compiler.apply_converters(values, converters))
        for value, field in zip(values[0], fields, strict=True):
            setattr(obj, field.attname, value)
    for obj, name in followers:
        _link(obj, name, row)


def _field(obj: Model, name: str) -> Field[Any, Any]:
    field = obj._meta.get_field(name)
    if not isinstance(field, Field):
        raise ValueError(f"{obj._meta.label}.{name} is no column")
    return field


def _link(obj: Model, name: str, row: Model) -> None:
    """Set ``obj``'s field ``name`` to ``row``'s primary key (as text for a text field)."""
    field = _field(obj, name)
    text = field.get_internal_type() in TEXT_TYPES
    setattr(obj, field.attname, str(row.pk) if text else row.pk)
