"""The engine's SQL budget: a 4-call Plan-and-Execute run (5 stages: start, plan:1, two steps,
synthesize; auto-approved) must stay within 31 statements and 8 transactions, and within 3
statements per model call. Measured: 29 statements in 7 transactions (creation, the first
claim, a commit per stage). Each of these stages makes one call, which its commit writes
(the journal row with the run's counters and its event: one INSERT more in the commit, no
transaction of its own; issue 37); a checkpoint is inserted at the run's creation and at
each stage's commit (issue 33: the state each stage started from, where a fork can start).

How statements are counted: every statement Django sends on the run's connection
(``connection.execute_wrapper``) from ``create_run`` to the run's end, in autocommit mode
as a worker runs it (a transactional test, so ``atomic`` blocks are real transactions, not
savepoints). Transaction control (``BEGIN``; ``COMMIT`` is a driver call, never a statement)
is counted apart, as transactions, with a budget of its own. A statement made while the
call journal is busy with a model call (``before_call`` to the end of ``record``) is that
call's; every other statement (creating the run, claiming and committing stages, records)
is the run's fixed overhead. Per model call = (total − fixed) ÷ calls.

The breakdown (statement texts grouped, by phase) is printed when a budget is broken."""

from __future__ import annotations

import re
import threading
from collections import Counter

import pytest
from django.db import connection

from agents_app import engine, events
from agents_app.engine import journal
from agents_app.models import ModelCall
from tests.conftest import OFFLINE

pytestmark = pytest.mark.django_db(transaction=True)

TASK = "Collect the logs, then write a report."  # the offline planner: two steps
MAX_STATEMENTS = 31
MAX_PER_CALL = 3
MAX_TRANSACTIONS = 8  # creation, the first claim, a commit per stage (which writes its call)


class Counted:
    """Statements on this connection, each tagged with the phase it was made in."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.rows: list[tuple[str, str]] = []

    def phase(self) -> str:
        return getattr(self.local, "phase", "fixed")

    def __call__(self, execute, sql, params, many, context):
        self.rows.append((self.phase(), sql))
        return execute(sql, params, many, context)

    def statements(self, phase: str | None = None) -> list[str]:
        return [sql for p, sql in self.rows if not _control(sql) and phase in (None, p)]

    def transactions(self) -> int:
        return sum(1 for _, sql in self.rows if sql.strip().upper().startswith("BEGIN"))

    def breakdown(self) -> str:
        groups = Counter((p, _shape(sql)) for p, sql in self.rows)
        return "\n".join(f"{n:3d}  {p:5s}  {shape}" for (p, shape), n in
                         sorted(groups.items(), key=lambda kv: (kv[0][0], -kv[1])))


def _control(sql: str) -> bool:
    return bool(re.match(r"\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b", sql, re.I))


def _shape(sql: str) -> str:
    """A statement without its values, short enough to group by."""
    sql = re.sub(r"\s+", " ", sql)
    sql = re.sub(r"'[^']*'|\b\d+\b|%s|\?", "?", sql)
    sql = re.sub(r"\(\?(, \?)*\)", "(…)", sql)
    return sql[:150]


@pytest.fixture
def counted(monkeypatch):
    """Counts statements and tags those the journal makes for a model call."""
    counter = Counted()

    def tagged(method):
        def wrapper(self, *args, **kwargs):
            counter.local.phase = "call"
            try:
                return method(self, *args, **kwargs)
            finally:
                counter.local.phase = "fixed"
        return wrapper

    monkeypatch.setattr(journal.DbJournal, "before_call", tagged(journal.DbJournal.before_call))
    monkeypatch.setattr(journal.DbJournal, "record", tagged(journal.DbJournal.record))
    monkeypatch.setattr(events, "broadcast", lambda run_id, seq: None)  # no Redis here
    return counter


def test_a_four_call_plan_and_execute_run_stays_within_its_sql_budget(alice, counted):
    with connection.execute_wrapper(counted):
        run = engine.create_run(alice, "plan_execute", TASK, options={"auto_approve": True},
                                models=OFFLINE, enqueue=False)
        run = engine.run_inline(run.pk)
    assert run.status == "completed", run.error
    calls = ModelCall.objects.filter(run=run).count()
    assert calls == 4 and run.calls == 4
    total = len(counted.statements())
    fixed = len(counted.statements("fixed"))
    per_call = (total - fixed) / calls
    report = (f"{total} statements ({fixed} fixed, {per_call:.2f} per model call), "
              f"{counted.transactions()} transactions\n{counted.breakdown()}")
    print(report)
    assert total <= MAX_STATEMENTS, report
    assert per_call <= MAX_PER_CALL, report
    assert counted.transactions() <= MAX_TRANSACTIONS, report
