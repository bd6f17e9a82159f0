"""``UPDATE … RETURNING`` for a queryset: one statement that changes a row and reads it back
(PostgreSQL, and SQLite since 3.35). Django's ``QuerySet.update`` returns only a row count,
so the engine would read the row again, or lock it first, for what it has just written: the
event counter it bumped, the counters a model call added to, the run it claimed.

The UPDATE is Django's own SQL for ``queryset.update(**values)`` (the same filters, field
preparation and expressions); only the RETURNING clause is added, and the returned values
go through each field's database converters, as a query's would. The engine's hot statements
use the same, compiled once (``prepared``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from django.db.models import Model, QuerySet

from .prepared import compile_update, execute_returning


def update_returning(queryset: QuerySet, values: dict[str, Any],
                     returning: Iterable[str] | None = None) -> dict[str, Any] | None:
    """Apply ``values`` to the queryset's rows (expected: at most one) and return the first
    updated row's ``returning`` fields (all concrete fields by default), or None when no row
    matched."""
    model = queryset.model
    fields = ([model._meta.get_field(name) for name in returning] if returning is not None
              else list(model._meta.concrete_fields))
    sql, params = compile_update(queryset, values, fields)
    return execute_returning(sql, params, model, fields, queryset.db)


M = TypeVar("M", bound=Model)


def instance_from(model: type[M], row: dict[str, Any], using: str = "default") -> M:
    """A model instance from a full row ``update_returning`` gave, as if loaded by a query."""
    names = [f.attname for f in model._meta.concrete_fields]
    return model.from_db(using, names, [row[name] for name in names])
