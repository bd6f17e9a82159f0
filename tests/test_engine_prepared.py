"""The engine's prepared statements do what the ORM's did (tests/prepared_checks.py; the same
checks run on PostgreSQL in tests/test_postgres.py), and a prepared statement is compiled
once per shape, not per call."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import (
    DEFAULT_DB_ALIAS,
    DatabaseError,
    IntegrityError,
    connection,
    connections,
    models,
    transaction,
)
from django.db.models import F, IntegerField
from django.db.transaction import TransactionManagementError

from agents_app import engine, events, prepared
from tests.prepared_checks import OFFLINE, check_prepared_statements

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_channel_layer(monkeypatch):
    monkeypatch.setattr(events, "broadcast", lambda run_id, seq: None)  # no Redis here


def test_the_prepared_statements_keep_the_engines_semantics_on_sqlite(alice):
    assert connection.vendor == "sqlite"
    assert "events" in check_prepared_statements(alice)


def test_a_run_compiles_each_hot_statement_once(alice, monkeypatch):
    compiled = []
    real = prepared.compile_update

    def counting(*args, **kwargs):
        compiled.append(args[0].model.__name__)
        return real(*args, **kwargs)

    monkeypatch.setattr(prepared, "compile_update", counting)
    monkeypatch.setattr(prepared, "_updates", {})
    for i in range(3):
        run = engine.create_run(alice, "plan_execute", f"Collect the logs, then report ({i}).",
                                options={"auto_approve": True}, models=OFFLINE,
                                enqueue=False)
        assert engine.run_inline(run.pk).status == "completed"
        if i == 0:
            first = len(compiled)
    # claim, stage start, a call's record, the commit shapes of one run: compiled by the
    # first run; the next two runs compile nothing
    assert 3 <= first == len(compiled), compiled
    assert set(compiled) == {"Run"}


def test_a_model_with_a_field_of_its_own_sql_is_inserted_through_the_orm(alice, monkeypatch):
    """A plain ``%s`` would not do for such a field (PostgreSQL's and GIS fields give their
    own placeholder SQL): the insert goes through the ORM, which asks the field for it."""
    from agents_app.models import Event, Run

    run = Run.objects.create(owner=alice, pattern="plan_execute", task="t")
    field = Event._meta.get_field("message")
    asked = []
    monkeypatch.setattr(field, "get_placeholder", lambda value, compiler, conn: (
        asked.append(value) or "%s"), raising=False)
    prepared.insert(Event, [{"run_id": run.pk, "seq": 1, "kind": "note", "message": "hi",
                             "data": {}}])
    assert asked == ["hi"]  # the ORM's INSERT asked the field
    assert list(Event.objects.filter(run=run).values_list("seq", "message")) == [(1, "hi")]


def test_a_slot_cannot_stand_for_a_field_with_sql_of_its_own(monkeypatch):
    from django.db.models import IntegerField

    from agents_app.models import Run

    field = IntegerField()
    monkeypatch.setattr(field, "get_placeholder", lambda *a: "%s", raising=False)
    def build():
        return (Run.objects.filter(pk=prepared.Slot("run", IntegerField())),
                {"calls": prepared.Slot("n", field)})

    with pytest.raises(TypeError, match="cannot stand for a field of type IntegerField"):
        prepared.update(("test", "own-sql"), build, {"run": 1, "n": 2})


# --- preparing values and running statements without Django's per-call layers -----------------
class Upper(models.CharField):
    """A subclass preparing its values its own way: never taken for a plain CharField."""

    def get_prep_value(self, value):
        return None if value is None else str(value).upper()


FIELDS = [
    (models.CharField(max_length=10), ["abc", "", None, 5, Decimal("1.5")]),
    (models.TextField(), ["ünï\x00", None, 7]),
    (models.IntegerField(), [0, -3, 2**62, None, True, "12", 4.0]),
    (models.BigIntegerField(), [2**63 - 1, None, False]),
    (models.PositiveIntegerField(), [9, None]),
    (models.BooleanField(), [True, False, None, 1, 0]),
    (models.FloatField(), [1.5, float("inf"), None, 3, "2.5", Decimal("0.1")]),
    (models.DecimalField(max_digits=12, decimal_places=6), [Decimal("0.000123"), 0.1, 3, None]),
    (models.DateTimeField(), [datetime(2026, 11, 26, 12, 0, tzinfo=UTC), None]),
    (models.JSONField(), [{"a": [1, "ü"]}, [], "text", None]),
    (Upper(max_length=10), ["abc", None]),
]


@pytest.mark.parametrize("for_save", [True, False], ids=["save", "compare"])
@pytest.mark.parametrize(("field", "values"), FIELDS,
                         ids=[type(f).__name__ for f, _ in FIELDS])
def test_a_preparer_gives_what_the_fields_own_preparation_gives(field, values, for_save):
    field.set_attributes_from_name("f")
    prep = prepared.preparer(field, for_save)
    own = field.get_db_prep_save if for_save else field.get_db_prep_value
    for value in values:
        got, want = prep(value, connection), own(value, connection=connection)
        assert (got, type(got)) == (want, type(want)), (value, got, want)
    assert prepared.preparer(Upper(max_length=10), for_save)("abc", connection) == "ABC"


def test_a_foreign_key_to_an_automatic_key_passes_its_int_on():
    from agents_app.models import Event

    prep = prepared.preparer(Event._meta.get_field("run"), True)
    assert prep(5, connection) == 5 and prep(None, connection) is None
    assert prep("5", connection) == 5  # not an int: the field's own preparation


def _event_update():
    from agents_app.models import Run

    return (Run.objects.filter(pk=prepared.slot(Run, "run", "id")),
            {"last_event_seq": F("last_event_seq") + prepared.Slot("n", IntegerField())})


def test_the_driver_and_djangos_cursor_run_a_statement_alike(alice):
    from agents_app.models import Run

    run = Run.objects.create(owner=alice, pattern="plan_execute", task="t")
    seen = []

    def watch(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    fast = prepared.update(("test", "seq"), _event_update, {"run": run.pk, "n": 2})
    with connection.execute_wrapper(watch):  # something watches: Django's cursor runs it
        watched = prepared.update(("test", "seq"), _event_update, {"run": run.pk, "n": 3})
    assert len(seen) == 1 and seen[0].startswith('UPDATE "agents_app_run"')
    assert set(fast) == set(watched) and fast["id"] == run.pk
    assert (fast["last_event_seq"], watched["last_event_seq"]) == (2, 5)
    assert isinstance(fast["created_at"], datetime) and fast["created_at"].tzinfo is not None
    assert fast["state"] == watched["state"] and isinstance(fast["options"], dict)
    assert prepared.update(("test", "seq"), _event_update, {"run": run.pk + 99, "n": 1}) is None


def test_a_failing_statement_raises_djangos_error_and_marks_the_transaction(alice):
    from agents_app.models import Event, Run

    run = Run.objects.create(owner=alice, pattern="plan_execute", task="t")
    row = {"run_id": run.pk, "seq": 1, "kind": "note", "message": "m", "data": {}}
    prepared.insert(Event, [row])
    with transaction.atomic():
        with pytest.raises(IntegrityError, match="UNIQUE"):
            prepared.insert(Event, [row])
        assert transaction.get_rollback()  # as the ORM's failed statement marks it
        # and the broken transaction refuses the next statement, as Django's cursor does
        with pytest.raises(TransactionManagementError):
            prepared.insert(Event, [{**row, "seq": 2}])
    assert list(Event.objects.filter(run=run).values_list("seq", flat=True)) == [1]


def test_a_connection_is_not_used_from_another_thread(alice):
    from agents_app.models import Run

    run = Run.objects.create(owner=alice, pattern="plan_execute", task="t")
    connection.ensure_connection()
    mine = connections[DEFAULT_DB_ALIAS]  # this thread's wrapper (``connection`` is a proxy)
    errors = []

    def other():
        try:
            prepared.run_sql(mine, prepared.Sql("SELECT id FROM agents_app_run WHERE id = %s"),
                             [run.pk], fetch=True)
        except DatabaseError as exc:
            errors.append(str(exc))

    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert errors and "same thread" in errors[0]


def test_sql_text_is_converted_once_as_djangos_sqlite_cursor_converts_it():
    sql = prepared.Sql("SELECT '%%s', %s, '100%%' WHERE 1 = %s")
    assert sql.qmark == "SELECT '%s', ?, '100%' WHERE 1 = ?"
    assert sql.text == "SELECT '%%s', %s, '100%%' WHERE 1 = %s"
