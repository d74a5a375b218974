"""Model rows read with plain SQL, built exactly as the ORM builds them.

A few reads run on every API request or create (the token, the tenant with the caller's
role, a flavor by name), where compiling the ORM's query costs more than the answer.
Values go through the ORM's converters and the instance through ``Model.from_db``::

    flavors = ModelRows(GpuFlavor, "f")
    cursor.execute(f"SELECT {flavors.columns} FROM tenants_gpuflavor f WHERE ...")
    flavor = flavors.build(cursor.fetchone())  # build(row, start) for later columns
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Model


class ModelRows:
    """The concrete columns of one model, selected under a table alias, and how to
    build an instance from them."""

    def __init__(self, model: type[Model], alias: str) -> None:
        self.model = model
        self.alias = alias

    @property
    def columns(self) -> str:
        """``alias."column", ...`` for every concrete field, in the model's order."""
        return _shape(self.model, self.alias)[0]

    @property
    def width(self) -> int:
        return len(_shape(self.model, self.alias)[1])

    def build(self, row: Sequence[Any], start: int = 0) -> Any:
        """The instance whose columns are ``row[start:start + width]``."""
        _, attnames, converters = _shape(self.model, self.alias)
        values = []
        for value, convert in zip(row[start : start + len(attnames)], converters, strict=True):
            for function, expression in convert:
                value = function(value, expression, connection)
            values.append(value)
        return self.model.from_db(connection.alias, attnames, values)


@functools.cache
def _shape(model: type[Model], alias: str) -> tuple[str, list[str], list[list[tuple[Any, Any]]]]:
    """The select list, the attribute names and, per column, the (converter, expression)
    pairs the ORM would apply to its value (built once per process and model)."""
    quote = connection.ops.quote_name
    # Any: django-stubs types a concrete field as Field, which lacks get_db_converters.
    fields: list[Any] = list(model._meta.concrete_fields)
    converters = []
    for field in fields:
        expression = field.get_col(model._meta.db_table)
        found = connection.ops.get_db_converters(expression) + field.get_db_converters(connection)
        converters.append([(function, expression) for function in found])
    columns = ", ".join(f"{alias}.{quote(field.column)}" for field in fields)
    return columns, [field.attname for field in fields], converters
