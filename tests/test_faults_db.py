"""SQLite locked by another connection for longer than the busy timeout
(tests/faults/db_locked.py does it to a real worker): a stage that cannot claim its run or
write its model call is run again once the lock is gone; never failed, never reported as a
failed model or reviewer, never half written. The busy timeout is shortened to 1 s here so a
3 s lock outlasts it."""

import functools
import sqlite3
import threading
import time

import pytest
from django.db import OperationalError, connection

from agents_app import engine
from agents_app.models import Event, ModelCall, Run
from agents_app.tasks import advance_run
from tests.conftest import OFFLINE
from tests.faults import common
from tests.faults.db_locked import integrity
from tests.scripted import ScriptedProvider

pytestmark = pytest.mark.django_db(transaction=True)

TASK = "Collect the logs, then find the error, and finally write a report."


@pytest.fixture
def short_busy_timeout():
    options = connection.settings_dict["OPTIONS"]
    before = options.get("timeout")
    options["timeout"] = 1
    connection.close()
    yield connection.settings_dict["NAME"]
    options["timeout"] = before
    connection.close()


class Lock:
    """``BEGIN EXCLUSIVE`` from another connection, held for ``seconds``."""

    def __init__(self, path: str, seconds: float):
        self.path, self.seconds = path, seconds
        self.held, self.released = threading.Event(), threading.Event()

    def _hold(self):
        con = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        con.execute("BEGIN EXCLUSIVE")
        self.held.set()
        time.sleep(self.seconds)
        con.execute("ROLLBACK")
        con.close()
        self.released.set()

    def take(self) -> "Lock":
        threading.Thread(target=self._hold, daemon=True).start()
        assert self.held.wait(10)
        return self


def test_a_run_that_cannot_be_claimed_waits_for_the_database_then_goes_on(
        short_busy_timeout, alice):
    run = engine.create_run(alice, "plan_execute", TASK, options={"auto_approve": True},
                            models=OFFLINE, enqueue=False)
    lock = Lock(short_busy_timeout, 3).take()
    assert engine.advance(run.pk, enqueue=False) is True  # nothing done; go on now
    assert lock.released.is_set()
    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.lease_owner, run.stage_attempt, run.last_event_seq) == \
        ("queued", "", 0, 1)
    assert engine.run_inline(run.pk).status == "completed"


def test_a_database_away_for_longer_is_tried_again_by_the_task(short_busy_timeout, alice,
                                                                monkeypatch):
    run = engine.create_run(alice, "plan_execute", TASK, options={"auto_approve": True},
                            models=OFFLINE, enqueue=False)
    scheduled = []
    monkeypatch.setattr(engine.scheduling, "schedule", lambda run_id, countdown=None:
                        scheduled.append((run_id, countdown)))
    monkeypatch.setattr(engine.stages, "_interrupted",
                        functools.partial(engine.stages._interrupted, patience=0.5))
    lock = Lock(short_busy_timeout, 3).take()
    advance_run.run(run.pk)  # the task: no exception, the run queued again for later
    assert scheduled == [(run.pk, engine.RETRY_AFTER_DB_ERROR)]
    assert lock.released.wait(10)
    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.lease_owner, run.last_event_seq) == ("queued", "", 1)
    assert engine.run_inline(run.pk).status == "completed"


@pytest.mark.parametrize("pattern, role", [("plan_execute", "executor"),
                                           ("debate", "debater"),
                                           ("code_review", "synthesizer")])
def test_a_stage_that_cannot_record_its_call_runs_again(short_busy_timeout, scripted, alice,
                                                        settings, tmp_path, pattern, role):
    """The lock is taken while the ``role`` call is out, so recording it fails: the stage is
    dropped and run again (its unrecorded call made again), with no "failed" anywhere."""
    settings.QUORUM_REPO_ROOTS = [str(tmp_path)]
    # Each commit in its stage's thread (a commit made ahead that the database fails runs the
    # stage before again: tests/test_commit_ahead.py).
    settings.QUORUM_COMMIT_AHEAD = False
    lock = None
    first = threading.Lock()  # parallel calls: only the first takes the lock

    def reply(messages, info):
        nonlocal lock
        with first:
            if info.role == role and lock is None:
                lock = Lock(short_busy_timeout, 3).take()
        return ScriptedProvider.offline_like(messages, info)

    scripted.fn = reply
    variant = common.VARIANTS[pattern][0]
    from agents_app.patterns import get_pattern

    models = {r: "scripted/main" for r in get_pattern(pattern).roles}
    run_id = common.run_clean(variant, 0, models=models)
    assert lock is not None and lock.released.is_set()
    run = Run.objects.get(pk=run_id)
    assert run.status == "completed", run.error
    resumed = list(Event.objects.filter(run=run, kind="stage_resumed")
                   .values_list("data", flat=True))
    assert len(resumed) == 1
    stage = resumed[0]["stage"]
    assert ModelCall.objects.filter(run=run, stage=stage, role=role).exists()
    assert not ModelCall.objects.filter(run=run).exclude(error="").exists()
    failed_kinds = {"argument_failed", "reviewer_failed", "reflection_failed",
                    "synthesizer_failed", "step_failed"}
    assert not Event.objects.filter(run=run, kind__in=failed_kinds).exists()
    keys = list(ModelCall.objects.filter(run=run).values_list("stage", "key"))
    assert len(keys) == len(set(keys))
    assert integrity(short_busy_timeout) == "ok"


def test_a_commit_that_reached_the_database_though_its_answer_was_lost_goes_on(
        alice, monkeypatch):
    """A server that crashes after committing a stage but before answering: the worker sees
    an error, finds its lease gone (the commit cleared it) and the run waiting for a worker,
    and goes on instead of leaving the run with no task."""
    run = engine.create_run(alice, "plan_execute", TASK, options={"auto_approve": True},
                            models=OFFLINE, enqueue=False)
    commit, lost = engine.stages.commit_result, []

    def commit_then_lose_the_answer(*args, **kwargs):
        done = commit(*args, **kwargs)
        if not lost:
            lost.append(True)
            raise OperationalError("server closed the connection unexpectedly")
        return done

    monkeypatch.setattr(engine.stages, "commit_result", commit_then_lose_the_answer)
    assert engine.advance(run.pk, enqueue=False) is True
    run = engine.run_inline(run.pk)
    assert run.status == "completed"
    assert not Event.objects.filter(run=run, kind="stage_resumed").exists()
    keys = list(ModelCall.objects.filter(run=run).values_list("stage", "key"))
    assert len(keys) == 5 == len(set(keys))
