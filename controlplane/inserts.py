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


# The INSERT statement of a model, with its link (if any) read from the new row, per
# database alias: compiling it through the ORM costs a create more than its parameters.
_STATEMENTS: dict[tuple[str, type[Model], str, str], str] = {}


def _compiled(obj: Model, using: str, link: str = "") -> tuple[str, tuple[Any, ...]]:
    """The INSERT of ``obj`` (all its columns but the serial key) with ``RETURNING`` the
    columns ``save()`` reads back, and its parameters: each column's value as the ORM
    prepares it (``pre_save``, then ``get_db_prep_save``). The statement is the ORM's,
    compiled once per model; a row with an expression among its values (other than its
    link) is compiled afresh."""
    fields = _columns(obj)
    # The link's SQL names the row's key column: part of the statement, so of its key.
    linked = getattr(obj, _field(obj, link).attname) if link else None
    key = (using, type(obj), link, getattr(linked, "sql", ""))
    plain = not any(
        hasattr(getattr(obj, f.attname), "resolve_expression") for f in fields if f.name != link
    )
    cached = _STATEMENTS.get(key) if plain else None
    if cached is not None:
        conn = connections[using]
        params = tuple(
            f.get_db_prep_save(f.pre_save(obj, True), connection=conn)
            for f in fields
            if f.name != link
        )
        return cached, params
    query = InsertQuery(type(obj))
    query.insert_values(fields, [obj])
    compiler = query.get_compiler(using=using)
    compiler.returning_fields = obj._meta.db_returning_fields
    [(sql, compiled_params)] = compiler.as_sql()
    if plain:
        _STATEMENTS[key] = sql
    return sql, tuple(compiled_params)


def _insert(obj: Model, using: str) -> None:
    meta = obj._meta
    query = InsertQuery(type(obj))
    query.insert_values(_columns(obj), [obj])
    returned = query.get_compiler(using=using).execute_sql(meta.db_returning_fields)
    for value, field in zip(returned[0] if returned else (), meta.db_returning_fields, strict=True):
        setattr(obj, field.attname, value)


def _insert_as_one(row: Model, followers: Sequence[tuple[Model, str]], using: str) -> None:
    key = connections[using].ops.quote_name(row._meta.pk.column)
    sql, params = _compiled(row, using)
    clauses = [f"{ROW} AS ({sql})"]
    all_params = list(params)
    for i, (obj, name) in enumerate(followers):
        field = _field(obj, name)
        cast = "::text" if field.get_internal_type() in TEXT_TYPES else ""
        setattr(obj, field.attname, RawSQL(f"(SELECT {key}{cast} FROM {ROW})", ()))
        sql, params = _compiled(obj, using, link=name)
        clauses.append(f"follower_{i} AS ({sql})")
        all_params.extend(params)
    # A clause that returns nothing (a follower keyed by its link) cannot be selected from.
    names = [ROW] + [
        f"follower_{i}" for i, (obj, _) in enumerate(followers) if obj._meta.db_returning_fields
    ]
    statement = f"WITH {', '.join(clauses)} SELECT * FROM {', '.join(names)}"
    with connections[using].cursor() as cursor:
        cursor.execute(statement, all_params)
        returned = cursor.fetchone()
    start = 0
    for obj in (row, *(f for f, _ in followers)):
        fields = obj._meta.db_returning_fields
        values = returned[start : start + len(fields)]
        start += len(fields)
        for value, field in zip(_converted(values, fields, obj, using), fields, strict=True):
            setattr(obj, field.attname, value)
    for obj, name in followers:
        _link(obj, name, row)


def _converted(values: Sequence[Any], fields: Sequence[Any], obj: Model, using: str) -> list[Any]:
    """Returned column values as ``save()`` sets them: through the backend's and the
    fields' converters (none for a serial key on PostgreSQL)."""
    conn = connections[using]
    out = []
    for value, field in zip(values, fields, strict=True):
        col = field.get_col(obj._meta.db_table)
        for convert in [*conn.ops.get_db_converters(col), *col.get_db_converters(conn)]:
            value = convert(value, col, conn)
        out.append(value)
    return out


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
