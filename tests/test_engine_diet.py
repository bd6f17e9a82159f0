"""The engine's lighter paths keep its promises: a stage's commit that claims the next stage
for the worker going on (a duplicate task still does nothing), a cancel seen through the
run's own updates, the lease checked by a call's counters update, and helper threads keeping
one connection for the stage."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from django.db import connections
from django.db.models import F

from agents_app import engine
from agents_app.engine import journal as journal_mod
from agents_app.engine.journal import DbJournal
from agents_app.llm.gateway import CallOutcome
from agents_app.models import Event, ModelCall, Run
from agents_app.patterns.base import Cancelled
from tests.conftest import OFFLINE, scripted_models

pytestmark = pytest.mark.django_db(transaction=True)

TASK = "Collect the logs, then find the error, and finally write a report."


def new_run(owner, models=None, **options):
    return engine.create_run(owner, "plan_execute", TASK, options={"auto_approve": True,
                                                                   **options},
                             models=models or OFFLINE, max_cost_usd=Decimal("1"),
                             enqueue=False)


def test_a_commit_claims_the_next_stage_and_a_duplicate_task_finds_it_taken(alice,
                                                                             monkeypatch):
    run = new_run(alice)
    real, duplicates = engine.stages.commit_result, []

    def commit_then_duplicate(*args, **kwargs):
        done = real(*args, **kwargs)
        if done.ahead is not None:  # made by a committer thread (engine/ahead.py): wait for it
            done.ahead.settle()
        if done.claimed_by:  # the next stage is this worker's already
            fresh = Run.objects.get(pk=run.pk)
            assert fresh.lease_owner == done.claimed_by and fresh.stage_attempt == 1
            events = Event.objects.filter(run=run).count()
            duplicates.append(engine.advance(run.pk, enqueue=False))  # a redelivered task
            assert Event.objects.filter(run=run).count() == events
        return done

    monkeypatch.setattr(engine.stages, "commit_result", commit_then_duplicate)
    run = engine.run_inline(run.pk)
    assert run.status == "completed" and not run.lease_owner
    assert duplicates == [False] * 5  # start, plan, two steps → the next; none after the end
    kinds = list(Event.objects.filter(run=run).values_list("kind", flat=True))
    assert kinds.count("stage_started") == 6 and "stage_resumed" not in kinds
    seqs = list(Event.objects.filter(run=run).values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)) and run.last_event_seq == len(seqs)


def test_a_cancel_during_a_call_stops_the_run_before_the_next_stage_starts(alice, scripted):
    run = new_run(alice, models=scripted_models())

    def reply(messages, info):
        if info.role == "executor":  # the first step's call: a person cancels meanwhile
            assert "stops before its next model call" in engine.cancel(
                Run.objects.get(pk=run.pk), alice)
        return scripted.offline_like(messages, info)

    scripted.fn = reply
    run = engine.run_inline(run.pk)
    assert run.status == "cancelled" and not run.lease_owner
    assert scripted.roles() == ["planner", "executor"]
    started = list(Event.objects.filter(run=run, kind="stage_started")
                   .values_list("data__stage", flat=True))
    assert started == ["start", "plan:1", "step:1:0"]  # the next step never started
    assert Event.objects.filter(run=run, kind="run_cancelled").count() == 1


def test_a_deadline_hands_the_run_back_unclaimed(alice):
    run = new_run(alice)
    assert engine.advance_in_place(run.pk, deadline=0.0) is True  # one stage, then queued
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.stage == "plan:1" and fresh.lease_owner == "" and fresh.stage_attempt == 0
    assert engine.run_inline(fresh.pk).status == "completed"


def claimed_journal(run: Run, stage: str = "plan:1") -> tuple[DbJournal, str]:
    token = engine.leases.lease_token()
    claimed = engine.leases.claim_run(run.pk, token)
    assert claimed is not None
    return DbJournal(claimed, stage, token), token


def outcome(tokens=(10, 5)) -> CallOutcome:
    return CallOutcome(role="planner", model="offline/default", messages=[], response="r",
                       prompt_tokens=tokens[0], completion_tokens=tokens[1], cost_usd=0.25)


def test_a_cancel_is_seen_before_the_next_call_once_the_runs_figures_are_not_fresh(
        alice, monkeypatch):
    run = new_run(alice)
    journal, _ = claimed_journal(run)
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    journal.before_call("a", "planner", "offline/default")  # read by the claim a moment ago
    monkeypatch.setattr(journal_mod, "FRESH_SECONDS", 0.0)  # a tool ran in between, say
    with pytest.raises(Cancelled):
        journal.before_call("b", "planner", "offline/default")


def test_a_calls_update_returns_the_cancel_and_the_counters(alice):
    run = new_run(alice)
    journal, _ = claimed_journal(run)
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    journal.record("planner", outcome())  # kept for the stage's commit (the stage thread's)
    assert not ModelCall.objects.filter(run=run).exists() and journal.pending
    journal.flush()  # what the next call does first
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.calls, fresh.prompt_tokens, fresh.completion_tokens) == (1, 10, 5)
    assert fresh.cost_usd == Decimal("0.25")
    assert journal.snapshot["cost_usd"] == Decimal("0.25")
    assert journal.snapshot["prompt_tokens"] + journal.snapshot["completion_tokens"] == 15
    with pytest.raises(Cancelled):
        journal.before_call("next", "planner", "offline/default")


def test_a_call_returning_after_another_claim_is_not_recorded(alice):
    run = new_run(alice)
    journal, _ = claimed_journal(run)
    Run.objects.filter(pk=run.pk).update(lease_owner="another|worker|1")
    before = Run.objects.get(pk=run.pk)
    journal.record("planner", outcome())
    with pytest.raises(engine.LeaseLost):
        journal.flush()
    after = Run.objects.get(pk=run.pk)
    assert not ModelCall.objects.filter(run=run).exists()
    assert (after.calls, after.cost_usd, after.last_event_seq) == \
        (before.calls, before.cost_usd, before.last_event_seq)


def test_a_call_returning_after_its_lease_was_released_is_still_recorded_for_the_replay(alice):
    run = new_run(alice)
    journal, _ = claimed_journal(run)
    Run.objects.filter(pk=run.pk).update(lease_owner="", lease_expires_at=None)
    journal.record("planner", outcome())
    journal.flush()
    assert ModelCall.objects.filter(run=run, stage="plan:1", key="planner").count() == 1
    assert Run.objects.get(pk=run.pk).calls == 1


def test_a_call_is_not_written_again_once_the_stage_committed(alice):
    # The commit wrote the call (its answer lost, say): a later flush finds the run moved on.
    run = new_run(alice)
    journal, token = claimed_journal(run)
    journal.record("planner", outcome())
    Run.objects.filter(pk=run.pk).update(stage_seq=F("stage_seq") + 1)  # the commit happened
    with pytest.raises(engine.LeaseLost):
        journal.flush()
    assert not ModelCall.objects.filter(run=run).exists()


def test_helper_threads_keep_one_connection_for_the_stage_then_it_is_closed(alice):
    run = new_run(alice)
    journal, _ = claimed_journal(run)
    wrappers, errors = [], []

    def helper():
        try:
            for i in range(3):
                journal.before_call(f"k{i}", "planner", "offline/default")
                journal.record(f"k{i}", outcome())
                wrappers.append((connections["default"], connections["default"].connection))
        except Exception as exc:  # reported below: an assert in a thread is lost
            errors.append(exc)

    thread = threading.Thread(target=helper)
    thread.start()
    thread.join()
    assert not errors
    assert len({id(raw) for _, raw in wrappers}) == 1  # one connection for its three calls
    wrapper = wrappers[0][0]
    assert wrapper.connection is not None  # kept while the stage goes on
    journal.finish()
    assert wrapper.connection is None  # closed with the stage
    assert ModelCall.objects.filter(run=run).count() == 3


def test_a_database_outage_during_a_command_is_logged_once_not_each_second(alice, monkeypatch,
                                                                            caplog):
    from django.db import OperationalError

    journal, _ = claimed_journal(new_run(alice))
    real = journal._refresh

    def unavailable():
        raise OperationalError("database is locked")

    monkeypatch.setattr(journal, "_refresh", unavailable)
    with caplog.at_level("INFO", logger="agents_app.engine.journal"):
        for _ in range(5):  # five seconds of an outage: the command runs on
            journal.while_waiting()
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1 and "cannot check the run" in said[0] and "locked" in said[0]
        monkeypatch.setattr(journal, "_refresh", real)
        journal.while_waiting()  # readable again: said once, and the next outage is said anew
        monkeypatch.setattr(journal, "_refresh", unavailable)
        journal.while_waiting()
        journal.while_waiting()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 3 and "can be checked again" in said[1] and "cannot check" in said[2]


def test_a_command_run_after_a_call_has_the_call_journaled_before_it_starts(alice, tmp_path):
    # A stage's last call waits for its commit, unless the stage runs a command first: then
    # it is written as the command's wait begins (a worker killed during a long test run
    # replays the call instead of making it again).
    from common import proc

    run = new_run(alice)
    journal, _ = claimed_journal(run)
    journal.record("planner", outcome())
    seen_during = []
    with proc.watched(lambda: seen_during.append(
            ModelCall.objects.filter(run=run).count()), every=0.05,
            begin=journal.before_waiting):
        done = proc.run(["sleep", "0.3"], cwd=tmp_path, timeout=30)
    assert done.returncode == 0 and seen_during and set(seen_during) == {1}
    assert not journal.pending and Run.objects.get(pk=run.pk).calls == 1


def test_a_database_outage_as_a_command_begins_leaves_the_call_for_the_commit(alice,
                                                                              monkeypatch):
    from django.db import OperationalError

    run = new_run(alice)
    journal, _ = claimed_journal(run)
    journal.record("planner", outcome())

    def unavailable(*args, **kwargs):
        raise OperationalError("database is locked")

    monkeypatch.setattr(journal, "_record", unavailable)
    journal.before_waiting()  # the command runs anyway
    assert len(journal.pending) == 1 and not ModelCall.objects.filter(run=run).exists()
