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

from django.conf import settings
from django.db import connections, models, transaction
from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX
from django.db.models import Field, Model, QuerySet
from django.db.models.expressions import Expression, SQLiteNumericMixin
from django.db.models.signals import post_save, pre_save
from django.db.models.sql import UpdateQuery
from django.utils import timezone
from django.utils.functional import cached_property


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

    @cached_property
    def preparer(self) -> Callable[[Any, Any], Any]:
        """``(value, connection) -> value`` prepared for the database as ``Value.as_sql``
        prepares its value."""
        return preparer(self.output_field, self.for_save)


# Django's own field classes whose values of one plain type go to the database as they are:
# ``get_db_prep_save``/``get_db_prep_value`` of such a value returns it unchanged (``to_python``
# of a str is the str, ``int()`` of an int the int, ...). Exact classes only: a subclass may
# prepare its values in a way of its own.
_PLAIN: dict[type[Field], type] = {
    models.CharField: str, models.TextField: str, models.BooleanField: bool,
    models.FloatField: float, models.IntegerField: int, models.BigIntegerField: int,
    models.SmallIntegerField: int, models.PositiveIntegerField: int,
    models.PositiveBigIntegerField: int, models.PositiveSmallIntegerField: int,
    models.AutoField: int, models.BigAutoField: int}


def preparer(field: Field, for_save: bool) -> Callable[[Any, Any], Any]:
    """``(value, connection) -> value`` as the database gets it: what ``field``'s
    ``get_db_prep_save`` (``for_save``) or ``get_db_prep_value`` returns, without the call
    when ``value`` is None or of the plain type the field passes on unchanged."""
    prep = field.get_db_prep_save if for_save else field.get_db_prep_value
    target = field.target_field if type(field) is models.ForeignKey else field
    plain = _PLAIN.get(type(target))
    if plain is None:
        return lambda value, connection: prep(value, connection=connection)

    def fast(value: Any, connection) -> Any:
        if value is None or type(value) is plain:
            return value
        return prep(value, connection=connection)

    return fast


class Sql:
    """A statement's text as Django's cursor takes it (``%s`` placeholders) and, for SQLite,
    as the driver takes it (``?``), converted once as Django's SQLite cursor converts it on
    every execution."""

    __slots__ = ("text", "qmark")

    def __init__(self, text: str):
        self.text = text
        self.qmark = FORMAT_QMARK_REGEX.sub("?", text).replace("%%", "%")


def run_sql(connection, sql: Sql, params: Sequence[Any], fetch: bool) -> Any:
    """Execute ``sql`` in ``connection``'s current transaction; its first row if ``fetch``.

    On SQLite the driver's cursor runs it, after the checks Django's cursor makes (thread,
    broken transaction, health check, connection) and under Django's error translation, so an
    error is the same ``django.db`` exception; on PostgreSQL the driver's too, as a prepared
    statement (``_run_prepared``). Django's cursor runs it when something watches statements
    (an execute wrapper, such as a statement count; the query log of DEBUG), behind a pooler
    in transaction mode, and on other databases."""
    on_driver = not (connection.execute_wrappers or connection.queries_logged)
    if on_driver and connection.vendor == "postgresql" and _prepares():
        return _run_prepared(connection, sql, params, fetch)
    if not (on_driver and connection.vendor == "sqlite"):
        with connection.cursor() as cursor:
            cursor.execute(sql.text, params)
            return cursor.fetchone() if fetch else None
    _checked(connection)
    with connection.wrap_database_errors:
        cursor = connection.connection.execute(sql.qmark, params)
        try:
            return cursor.fetchone() if fetch else None
        finally:
            cursor.close()


def _checked(connection) -> None:
    """The checks Django's cursor makes before a statement (health check, connection, thread,
    broken transaction), for a statement sent on the driver's own cursor."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    connection.validate_no_broken_transaction()


def _prepares() -> bool:
    """PostgreSQL keeps the engine's statements prepared on each connection (parsed and
    planned once: planning the run's UPDATE, on a table of 28 indexes, took 0.14 ms of its
    0.22), unless a pooler in transaction mode stands between (``QUORUM_DB_TRANSACTION_POOLER``:
    a prepared statement lives on one server connection, which the next transaction may not
    get)."""
    return not settings.QUORUM_DB_TRANSACTION_POOLER


ONLY_WHEN_ASKED = 2**31


def _run_prepared(connection, sql: Sql, params: Sequence[Any], fetch: bool) -> Any:
    """``sql`` on PostgreSQL as a prepared statement: the driver's server-binding cursor
    (Django's binds values into the text on the client, which cannot be prepared), after the
    checks Django's cursor makes, under its error translation."""
    import psycopg

    _checked(connection)
    raw = connection.connection
    if raw.prepare_threshold is None:
        # Django turns preparing off (None), which ``prepare=True`` cannot override. A threshold
        # never reached prepares only what asks for it: these statements (Django's own queries
        # bind on the client, and are never prepared).
        raw.prepare_threshold = ONLY_WHEN_ASKED
    with connection.wrap_database_errors, psycopg.Cursor(raw) as cursor:
        cursor.execute(sql.text, params, prepare=True)
        return cursor.fetchone() if fetch else None


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
        text, self.params = compile_update(queryset, values, self.fields)
        self.sql = Sql(text)
        # Per parameter: the slot's name and preparer, or the value Django's compiler bound.
        self.binds = [(p.name, p.preparer) if isinstance(p, Slot) else (None, p)
                      for p in self.params]
        self.reader: _Reader | None = None


class _Reader:
    """An UPDATE's RETURNING row as ``{attname: value}``, each value through its field's
    database converters, as a query's values are (the converters found once per
    statement)."""

    def __init__(self, model: type[Model], fields: Sequence[Field], connection):
        table = model._meta.db_table
        self.names = [f.attname for f in fields]
        self.converted = []  # (position, column, converters)
        for i, f in enumerate(fields):
            col = f.get_col(table)
            convs = [*connection.ops.get_db_converters(col), *f.get_db_converters(connection)]
            if convs:
                self.converted.append((i, col, convs))

    def read(self, row: Sequence[Any], connection) -> dict[str, Any]:
        values = list(row)
        for i, col, convs in self.converted:
            value = values[i]
            for convert in convs:
                value = convert(value, col, connection)
            values[i] = value
        return dict(zip(self.names, values, strict=True))


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
                      fields: Sequence[Field], using: str) -> dict[str, Any] | None:
    """Run an UPDATE … RETURNING; the first row as ``{attname: value}`` (converted as a
    query's values are), or None."""
    connection = connections[using]
    row = _first_row(connection, using, Sql(sql), params)
    return None if row is None else _Reader(model, fields, connection).read(row, connection)


def _first_row(connection, using: str, sql: Sql, params: Sequence[Any]) -> Any:
    with transaction.mark_for_rollback_on_error(using=using):
        return run_sql(connection, sql, params, fetch=True)


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
    params = [value if name is None else value(binds[name], connection)
              for name, value in stmt.binds]
    row = _first_row(connection, using, stmt.sql, params)
    if row is None:
        return None
    reader = stmt.reader
    if reader is None:
        reader = stmt.reader = _Reader(stmt.model, stmt.fields, connection)
    return reader.read(row, connection)


# --- inserts -----------------------------------------------------------------------------------
class _Insert:
    """A model's plain INSERT of ``rows`` rows: every concrete field but the automatic key, in
    order, each with how ``Model.save`` would fill and prepare it."""

    def __init__(self, model: type[Model], rows: int, connection):
        ops = connection.ops
        fields = [f for f in model._meta.concrete_fields if not f.primary_key]
        one = "(" + ", ".join(["%s"] * len(fields)) + ")"
        # Only the model's own table and column names (quoted) go into the text.
        table = ops.quote_name(model._meta.db_table)
        columns = ", ".join(ops.quote_name(f.column) for f in fields)
        self.sql = Sql(f"INSERT INTO {table} ({columns}) VALUES "  # noqa: S608
                       + ", ".join([one] * rows))
        # (attname, fills with the time now (auto_now/auto_now_add: as ``pre_save`` sets it
        # on an insert, whatever was given), the field, its preparer)
        self.fields = [(f.attname, bool(getattr(f, "auto_now", False)
                                        or getattr(f, "auto_now_add", False)),
                        f, preparer(f, for_save=True)) for f in fields]


_inserts: dict[tuple[str, type[Model], int], _Insert] = {}


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
    connection = connections[using]
    stmt = _inserts.get((using, model, len(rows)))
    if stmt is None:
        stmt = _inserts[(using, model, len(rows))] = _Insert(model, len(rows), connection)
    now = timezone.now()
    params = []
    for row in rows:
        for name, auto_now, field, prep in stmt.fields:
            if auto_now:
                value = now
            elif name in row:
                value = row[name]
            else:
                value = field.get_default()
            params.append(prep(value, connection))
    with transaction.mark_for_rollback_on_error(using=using):
        run_sql(connection, stmt.sql, params, fetch=False)
