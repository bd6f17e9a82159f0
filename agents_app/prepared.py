"""The engine's hot statements, compiled once: a stage's commit, a model call's record, the
claim, the events. Building a queryset and compiling it (Django's SQL compiler) cost more CPU
than executing the statement on SQLite; these statements run a few times per model call with
the same shape, so each is compiled the first time by Django, with named ``Slot``
placeholders where its values change, and later executions only bind the values.

A ``Slot`` compiles to the same SQL a plain value or a ``Value`` would (``%s``, under the
same ``CAST`` on SQLite for a decimal), and its value is prepared for the database as
Django prepares it (``get_db_prep_save`` for a value written, ``get_db_prep_value`` for one
compared), so the statement and its parameters are what ``QuerySet.update`` would send.
Inserts are plain ``INSERT … VALUES`` (valid on SQLite and PostgreSQL) with every concrete
field but the automatic key, prepared the way ``Model.save`` prepares them (defaults,
``auto_now_add``), for models no signal listens to (checked: else the ORM inserts them)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from django.db import connections, transaction
from django.db.models import Field, Model, QuerySet
from django.db.models.expressions import Expression, SQLiteNumericMixin
from django.db.models.signals import post_save, pre_save
from django.db.models.sql import UpdateQuery
from django.utils import timezone


class Slot(SQLiteNumericMixin, Expression):
    """A named parameter of a prepared statement: compiled as ``Value`` compiles (a
    placeholder, in a ``CAST`` on SQLite for a decimal), but with no value of its own (a
    ``Value`` of None would be taken for SQL NULL or JSON null)."""

    for_save = False

    def __init__(self, name: str, output_field: Field):
        super().__init__(output_field=output_field)
        self.name = name

    def __repr__(self) -> str:
        return f"Slot({self.name!r})"

    def resolve_expression(self, query=None, allow_joins=True, reuse=None, summarize=False,
                           for_save=False):
        c = super().resolve_expression(query, allow_joins, reuse, summarize, for_save)
        c.for_save = for_save
        return c

    def as_sql(self, compiler, connection):
        connection.ops.check_expression_support(self)
        if hasattr(self.output_field, "get_placeholder"):  # a field with SQL of its own
            # A statement builder's mistake, found when it is first compiled: such a field's
            # value needs its own SQL around the placeholder, which a bare slot cannot give.
            raise TypeError(f"a Slot cannot stand for a field of type {type(self.output_field).__name__} "
                            "(it has SQL of its own): pass the value in the queryset instead")
        return "%s", [self]

    def get_group_by_cols(self):
        return []

    def bind(self, value: Any, connection) -> Any:
        """``value`` prepared for the database as ``Value.as_sql`` prepares its value."""
        field = self.output_field
        if self.for_save:
            return field.get_db_prep_save(value, connection=connection)
        return field.get_db_prep_value(value, connection=connection)


def slot(model: type[Model], name: str, field: str | None = None) -> Slot:
    """A slot named ``name`` typed as ``model``'s field ``field`` (default: ``name``)."""
    return Slot(name, model._meta.get_field(field or name))


class _Update:
    def __init__(self, queryset: QuerySet, values: dict[str, Any],
                 returning: Iterable[str] | None):
        model = queryset.model
        self.model = model
        self.fields = ([model._meta.get_field(name) for name in returning]
                       if returning is not None else list(model._meta.concrete_fields))
        self.sql, self.params = compile_update(queryset, values, self.fields)
        self.converters: list[list[Callable]] | None = None

    def converters_for(self, connection) -> list[list[Callable]]:
        if self.converters is None:
            out = []
            for field in self.fields:
                col = field.get_col(self.model._meta.db_table)
                out.append([*connection.ops.get_db_converters(col),
                             *field.get_db_converters(connection)])
            self.converters = out
        return self.converters


def compile_update(queryset: QuerySet, values: dict[str, Any],
                   fields: Sequence[Field]) -> tuple[str, list[Any]]:
    """Django's SQL for ``queryset.update(**values)``, with ``RETURNING`` ``fields``."""
    query = queryset.query.chain(UpdateQuery)
    query.add_update_values(values)
    query.annotations = {}
    connection = connections[queryset.db]
    sql, params = query.get_compiler(queryset.db).as_sql()
    if not sql:
        raise ValueError("an UPDATE needs values to set")
    sql += " RETURNING " + ", ".join(connection.ops.quote_name(f.column) for f in fields)
    return sql, list(params)


def execute_returning(sql: str, params: Sequence[Any], model: type[Model],
                      fields: Sequence[Field], converters: list[list[Callable]] | None,
                      using: str) -> dict[str, Any] | None:
    """Run an UPDATE … RETURNING; the first row as ``{attname: value}`` (converted as a
    query's values are), or None."""
    connection = connections[using]
    with transaction.mark_for_rollback_on_error(using=using), connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    if converters is None:
        table = model._meta.db_table
        converters = [[*connection.ops.get_db_converters(f.get_col(table)),
                       *f.get_db_converters(connection)] for f in fields]
    out = {}
    table = model._meta.db_table
    for field, convs, value in zip(fields, converters, row, strict=True):
        if convs:
            col = field.get_col(table)
            for convert in convs:
                value = convert(value, col, connection)
        out[field.attname] = value
    return out


_updates: dict[tuple[str, Hashable], _Update] = {}
_lock = threading.Lock()


def update(key: Hashable, build: Callable[[], tuple[QuerySet, dict[str, Any]]],
           binds: dict[str, Any], returning: Iterable[str] | None = None,
           using: str = "default") -> dict[str, Any] | None:
    """The prepared UPDATE ``key`` (``build()`` gives its queryset and values, with slots;
    called once per ``key``) run with the slots' values ``binds``; the updated row's
    ``returning`` fields (all concrete fields by default), or None when no row matched.
    ``key`` names the statement's shape: two builds with one key must give one statement."""
    stmt = _updates.get((using, key))
    if stmt is None:
        queryset, values = build()
        stmt = _Update(queryset.using(using), values, returning)
        with _lock:
            _updates[(using, key)] = stmt
    connection = connections[using]
    params = [p.bind(binds[p.name], connection) if isinstance(p, Slot) else p
              for p in stmt.params]
    return execute_returning(stmt.sql, params, stmt.model, stmt.fields,
                             stmt.converters_for(connection), using)


# --- inserts -----------------------------------------------------------------------------------
_inserts: dict[tuple[str, type[Model], int], tuple[str, list[Field]]] = {}


def _insert_sql(model: type[Model], rows: int, using: str) -> tuple[str, list[Field]]:
    found = _inserts.get((using, model, rows))
    if found is None:
        ops = connections[using].ops
        fields = [f for f in model._meta.concrete_fields if not f.primary_key]
        one = "(" + ", ".join(["%s"] * len(fields)) + ")"
        # Only the model's own table and column names (quoted) go into the text.
        table = ops.quote_name(model._meta.db_table)
        columns = ", ".join(ops.quote_name(f.column) for f in fields)
        sql = f"INSERT INTO {table} ({columns}) VALUES " + ", ".join([one] * rows)  # noqa: S608
        found = _inserts[(using, model, rows)] = (sql, fields)
    return found


def insert(model: type[Model], rows: Sequence[dict[str, Any]], using: str = "default") -> None:
    """Insert ``rows`` (``{attname: value}``; a field left out gets its default, an
    ``auto_now``/``auto_now_add`` one the time now) in one statement, as ``Model.save``
    would write each, without reading their keys back."""
    if not rows:
        return
    # The ORM writes them when a save signal listens (it must see the instances) or a field
    # needs SQL of its own around its placeholder (a plain ``%s`` would not do).
    if (pre_save.has_listeners(model) or post_save.has_listeners(model)
            or any(hasattr(f, "get_placeholder") for f in model._meta.concrete_fields)):
        objs = [model(**row) for row in rows]
        if len(objs) == 1:
            objs[0].save(using=using, force_insert=True)
        else:
            model._default_manager.using(using).bulk_create(objs)
        return
    sql, fields = _insert_sql(model, len(rows), using)
    connection = connections[using]
    now = timezone.now()
    params = []
    for row in rows:
        for f in fields:
            if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
                value = now  # as ``pre_save`` sets it on an insert, whatever was given
            elif f.attname in row:
                value = row[f.attname]
            else:
                value = f.get_default()
            params.append(f.get_db_prep_save(value, connection=connection))
    with transaction.mark_for_rollback_on_error(using=using), connection.cursor() as cursor:
        cursor.execute(sql, params)
