"""The engine's prepared statements do what the ORM's did (tests/prepared_checks.py; the same
checks run on PostgreSQL in tests/test_postgres.py), and a prepared statement is compiled
once per shape, not per call."""

from __future__ import annotations

import pytest
from django.db import connection

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
