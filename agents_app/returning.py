"""``UPDATE … RETURNING`` for a queryset: one statement that changes a row and reads it back
(PostgreSQL, and SQLite since 3.35). Django's ``QuerySet.update`` returns only a row count,
so the engine would read the row again, or lock it first, for what it has just written: the
event counter it bumped, the counters a model call added to, the run it claimed.

The UPDATE is Django's own SQL for ``queryset.update(**values)`` (the same filters, field
preparation and expressions); only the RETURNING clause is added, and the returned values
go through each field's database converters, as a query's would."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from django.db import connections, transaction
from django.db.models import Model, QuerySet
from django.db.models.sql import UpdateQuery


def update_returning(queryset: QuerySet, values: dict[str, Any],
                     returning: Iterable[str] | None = None) -> dict[str, Any] | None:
    """Apply ``values`` to the queryset's rows (expected: at most one) and return the first
    updated row's ``returning`` fields (all concrete fields by default), or None when no row
    matched."""
    model = queryset.model
    fields = ([model._meta.get_field(name) for name in returning] if returning is not None
              else list(model._meta.concrete_fields))
    query = queryset.query.chain(UpdateQuery)
    query.add_update_values(values)
    query.annotations = {}
    db = queryset.db
    connection = connections[db]
    sql, params = query.get_compiler(db).as_sql()
    if not sql:
        raise ValueError("update_returning needs values to set")
    ops = connection.ops
    sql += " RETURNING " + ", ".join(ops.quote_name(f.column) for f in fields)
    with transaction.mark_for_rollback_on_error(using=db), connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    out = {}
    for field, value in zip(fields, row, strict=True):
        col = field.get_col(model._meta.db_table)
        for convert in (*ops.get_db_converters(col), *field.get_db_converters(connection)):
            value = convert(value, col, connection)
        out[field.attname] = value
    return out


M = TypeVar("M", bound=Model)


def instance_from(model: type[M], row: dict[str, Any], using: str = "default") -> M:
    """A model instance from a full row ``update_returning`` gave, as if loaded by a query."""
    names = [f.attname for f in model._meta.concrete_fields]
    return model.from_db(using, names, [row[name] for name in names])
