"""A stage's commit made while the next stage's first model call is out
(agents_app/engine/ahead.py): the overlap itself, and each way that commit can end (made,
refused, failed by the database, overtaken by a cancel), on the real database with committed
transactions (the committer thread has a connection of its own), scripted models behind
LiteLLM."""

import threading
import time
from decimal import Decimal

import pytest
from django.db import OperationalError

from agents_app import engine
from agents_app.engine import ahead, cancels
from agents_app.models import Event, ModelCall, Run, StepResult
from tests.conftest import scripted_models
from tests.stack import free_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def commit_ahead(settings, monkeypatch):
    """On (its default on PostgreSQL only), with Redis asked afresh in each test."""
    settings.QUORUM_COMMIT_AHEAD = True
    monkeypatch.setattr(cancels, "_client", None)
    monkeypatch.setattr(cancels, "_unanswered_until", 0.0)


def new_run(owner):
    return engine.create_run(owner, "plan_execute",
                             "Collect logs, then find the error, and finally write a report.",
                             options={"auto_approve": True}, models=scripted_models(),
                             max_cost_usd=Decimal("1"), max_tokens=100_000, enqueue=False)


def hold_commits(monkeypatch, scripted, before_write=None):
    """Every commit made ahead waits in its committer thread until the next stage's model
    call has reached the provider (10 s at most), then runs ``before_write(stage, n)`` (n:
    the commits made ahead so far, from 1) and writes. Returns, for each: the stage, whether
    its next stage's call arrived during the wait, and the thread it was made in."""
    seen: list[tuple[str, bool, str]] = []
    real = ahead.hand_off

    def held_hand_off(write, **kw):
        before = len(scripted.calls)

        def held():
            deadline = time.monotonic() + 10
            while len(scripted.calls) == before and time.monotonic() < deadline:
                time.sleep(0.002)
            seen.append((kw["stage"], len(scripted.calls) > before,
                         threading.current_thread().name))
            if before_write is not None:
                before_write(kw["stage"], len(seen))
            return write()

        return real(held, **kw)

    monkeypatch.setattr(ahead, "hand_off", held_hand_off)
    return seen


def gapless(run):
    seqs = list(Event.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    return seqs == list(range(1, len(seqs) + 1))


def test_the_next_call_goes_out_while_the_commit_before_it_is_made(alice, scripted,
                                                                   monkeypatch):
    seen = hold_commits(monkeypatch, scripted)
    run = engine.run_inline(new_run(alice).pk)
    assert run.status == "completed"
    # Each commit that led to another stage waited for that stage's call and saw it arrive:
    # with the commit in the stage's own thread the call could only come after it.
    assert [s for s, _, _ in seen] == ["start", "plan:1", "step:1:0", "step:1:1", "step:1:2"]
    assert all(arrived for _, arrived, _ in seen)
    assert all(thread.startswith("quorum-commit") for _, _, thread in seen)
    assert ModelCall.objects.filter(run=run).count() == run.calls == len(scripted.calls) == 5
    assert StepResult.objects.filter(run=run, status="done").count() == 3
    assert gapless(run)


def test_made_ahead_or_not_the_run_writes_the_same(alice, scripted, settings):
    def written(run):
        return (list(Event.objects.filter(run=run).order_by("seq").values_list("kind", "seq")),
                sorted(ModelCall.objects.filter(run=run).values_list("stage", "key")),
                list(StepResult.objects.filter(run=run).order_by("index").values_list(
                    "index", "status", "output")))

    ahead_run = engine.run_inline(new_run(alice).pk)
    settings.QUORUM_COMMIT_AHEAD = False
    plain_run = engine.run_inline(new_run(alice).pk)
    assert ahead_run.status == plain_run.status == "completed"
    assert written(ahead_run) == written(plain_run)
    for field in ("calls", "prompt_tokens", "completion_tokens", "cost_usd", "answer",
                  "stage_seq"):
        assert getattr(ahead_run, field) == getattr(plain_run, field), field


def test_off_by_setting_the_commit_is_made_in_the_stages_thread(alice, scripted, settings,
                                                                monkeypatch):
    settings.QUORUM_COMMIT_AHEAD = False
    seen = hold_commits(monkeypatch, scripted)
    assert engine.run_inline(new_run(alice).pk).status == "completed"
    assert seen == []


@pytest.mark.django_db  # inside the test's transaction, which another connection cannot see
def test_inside_a_transaction_the_commit_is_not_made_ahead(alice, scripted, monkeypatch):
    seen = hold_commits(monkeypatch, scripted)
    assert engine.run_inline(new_run(alice).pk).status == "completed"
    assert seen == []


def test_a_refused_commit_drops_the_next_stage_and_its_answer(alice, scripted, monkeypatch):
    pk = new_run(alice).pk

    def another_worker_takes_the_run(stage, n):
        if n == 2:  # plan:1's commit, which writes the planner's call
            Run.objects.filter(pk=pk).update(lease_owner="other-host|boot|1.1|1")

    seen = hold_commits(monkeypatch, scripted, another_worker_takes_the_run)
    run = engine.run_inline(pk)
    assert [s for s, _, _ in seen] == ["start", "plan:1"]
    assert run.lease_owner == "other-host|boot|1.1|1" and run.stage == "plan:1"
    # Neither call is kept, as when the commit is made in the stage's thread: the planner's
    # call is not this worker's to record once the run is another's, and the executor's went
    # out for a stage that never existed.
    assert not ModelCall.objects.filter(run=run).exists()
    assert len(scripted.calls) == 2 and run.calls == 0
    assert not StepResult.objects.filter(run=run).exists()
    assert gapless(run)


def test_a_commit_the_database_failed_runs_its_stage_again_and_drops_the_next(
        alice, scripted, monkeypatch):
    def the_server_goes_away(stage, n):
        if n == 2:  # plan:1's commit
            raise OperationalError("server closed the connection unexpectedly")

    seen = hold_commits(monkeypatch, scripted, the_server_goes_away)
    run = engine.run_inline(new_run(alice).pk)
    assert run.status == "completed"
    assert [s for s, _, _ in seen][:3] == ["start", "plan:1", "plan:1"]  # it ran again
    # The planner's call was written once (by the recovery) and replayed; the executor's
    # first call, made for a stage that was dropped, went out twice and is recorded once.
    assert sorted(ModelCall.objects.filter(run=run).values_list("stage", "key")) == [
        ("plan:1", "planner"), ("step:1:0", "executor"), ("step:1:1", "executor"),
        ("step:1:2", "executor"), ("synthesize", "synthesizer")]
    assert [c.role for c in scripted.calls] == [
        "planner", "executor", "executor", "executor", "executor", "synthesizer"]
    assert run.calls == 5
    assert Event.objects.filter(run=run, kind="stage_resumed").count() == 1
    assert StepResult.objects.filter(run=run, status="done").count() == 3
    assert gapless(run)


def test_a_cancel_before_the_commit_stops_the_next_stage_with_its_call_recorded(
        alice, scripted, monkeypatch):
    pk = new_run(alice).pk

    def cancel_now(stage, n):
        if n == 2:  # plan:1's commit
            engine.cancel(Run.objects.get(pk=pk), alice)

    hold_commits(monkeypatch, scripted, cancel_now)
    run = engine.run_inline(pk)
    assert run.status == "cancelled" and run.lease_owner == ""
    assert sorted(ModelCall.objects.filter(run=run).values_list("stage", "key")) == [
        ("plan:1", "planner"), ("step:1:0", "executor")]
    assert run.calls == 2 == len(scripted.calls)
    # The stage that made the call is on the timeline, though the cancel came before its claim
    # was committed: it had started.
    assert list(Event.objects.filter(run=run, kind="stage_started").order_by("seq")
                .values_list("data__stage", flat=True)) == ["start", "plan:1", "step:1:0"]
    assert Event.objects.filter(run=run, kind="run_cancelled").count() == 1
    assert not StepResult.objects.filter(run=run).exists()
    assert gapless(run)


def test_a_bug_in_the_commit_is_raised_in_the_stages_thread(alice, scripted, monkeypatch):
    def a_bug(stage, n):
        raise ZeroDivisionError("a bug in a record writer")

    hold_commits(monkeypatch, scripted, a_bug)
    with pytest.raises(ZeroDivisionError):
        engine.run_inline(new_run(alice).pk)


def cancel_during_the_first_steps_last_call(run, alice, scripted):
    """The first step's executor answers without JSON, so the step calls it again; a person
    cancels while that second call (the stage's last) is out. By then the commit before the
    step is confirmed (the first call's record waited for it), so nothing but the check before
    the step's own commit can stop the next step's call."""
    calls = []

    def reply(messages, info):
        if info.role == "executor":
            calls.append(info)
            if len(calls) == 1:
                return "Done, see above."
            if len(calls) == 2:
                assert "stops before its next model call" in engine.cancel(
                    Run.objects.get(pk=run.pk), alice)
        return scripted.offline_like(messages, info)

    scripted.fn = reply


@pytest.mark.integration
def test_a_cancel_told_through_redis_stops_the_run_before_the_next_stage_s_call(
        alice, scripted, redis_server, monkeypatch):
    """A cancel asked for during a stage's last call: the worker hears of it from Redis (no
    read of the run) and commits that stage in its own thread, which stops the run."""
    answers = []
    real = cancels.asked

    def asked(run_id):
        answers.append(real(run_id))
        return answers[-1]

    monkeypatch.setattr(cancels, "asked", asked)
    run = new_run(alice)
    cancel_during_the_first_steps_last_call(run, alice, scripted)
    run = engine.run_inline(run.pk)
    assert run.status == "cancelled" and not run.lease_owner
    assert scripted.roles() == ["planner", "executor", "executor"]  # none after the cancel
    assert answers[-1] is True and None not in answers, answers
    assert real(run.pk) is True


def test_without_redis_a_cancel_is_read_from_the_database(alice, scripted, settings,
                                                          monkeypatch, caplog):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    assert cancels.asked(1) is None
    assert cancels._unanswered_until > 0  # not asked again for a while: the run is read
    run = new_run(alice)
    cancel_during_the_first_steps_last_call(run, alice, scripted)
    run = engine.run_inline(run.pk)
    assert run.status == "cancelled"
    assert scripted.roles() == ["planner", "executor", "executor"]  # read from the run
    assert "could not tell the workers of the cancel" in caplog.text


def count_run_reads(monkeypatch) -> list[dict]:
    """From now on, the keyword arguments of every ``Run.objects.filter``, in a list."""
    reads: list[dict] = []
    real = Run.objects.filter

    def counted(*args, **kwargs):
        reads.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(Run.objects, "filter", counted)
    return reads


def test_a_lease_older_than_half_its_length_is_read_before_going_ahead(alice, scripted,
                                                                      settings, monkeypatch):
    """Redis says no cancel, but the stage's only call outlived half its lease, and another
    worker took the run meanwhile: the run is read, the commit is made in the stage's thread
    and refused, and the next stage's call never goes out."""
    settings.QUORUM_STAGE_LEASE_SECONDS = 2
    monkeypatch.setattr(cancels, "asked", lambda run_id: False)
    seen = hold_commits(monkeypatch, scripted)
    run = new_run(alice)
    reads: list[list[dict]] = []  # the reads made after the lease changed hands

    def reply(messages, info):
        if info.role == "planner":
            time.sleep(1.1)  # past half the lease since the call set it
            Run.objects.filter(pk=run.pk).update(lease_owner="another-worker")
            reads.append(count_run_reads(monkeypatch))
        return scripted.offline_like(messages, info)

    scripted.fn = reply
    engine.run_inline(run.pk)
    assert scripted.roles() == ["planner"]  # no executor call for a stage never committed
    assert [s for s, _, _ in seen] == ["start"]  # only the commit before the plan went ahead
    assert {"pk": run.pk} in reads[0]
    run.refresh_from_db()
    assert run.lease_owner == "another-worker" and run.stage == "plan:1"
    assert not ModelCall.objects.filter(run=run, role="executor").exists()


def test_a_young_lease_and_redis_saying_no_cancel_read_nothing(alice, scripted, monkeypatch):
    monkeypatch.setattr(cancels, "asked", lambda run_id: False)
    seen = hold_commits(monkeypatch, scripted)
    run = new_run(alice)
    reads = count_run_reads(monkeypatch)
    assert engine.run_inline(run.pk).status == "completed"
    assert len(seen) == 5 and {"pk": run.pk} not in reads


def test_with_every_committer_busy_the_commit_is_made_in_the_stages_thread(
        alice, scripted, settings, monkeypatch):
    settings.QUORUM_COMMIT_AHEAD_THREADS = 2
    monkeypatch.setattr(ahead, "_out", 2)  # two commits of other runs still being made
    seen = hold_commits(monkeypatch, scripted)
    assert engine.run_inline(new_run(alice).pk).status == "completed"
    assert seen == []
    monkeypatch.setattr(ahead, "_out", 1)  # one free: every commit goes ahead again
    assert engine.run_inline(new_run(alice).pk).status == "completed"
    assert [s for s, _, _ in seen] == ["start", "plan:1", "step:1:0", "step:1:1", "step:1:2"]
    assert ahead._out == 1  # each counted out and back in


def test_with_more_runs_in_flight_than_committers_each_commits_in_its_own_thread(
        alice, scripted, settings, monkeypatch):
    settings.QUORUM_COMMIT_AHEAD_THREADS = 2
    monkeypatch.setattr(ahead, "_advancing", 2)  # two other runs advancing in this process
    seen = hold_commits(monkeypatch, scripted)
    assert engine.run_inline(new_run(alice).pk).status == "completed"
    assert seen == []
    monkeypatch.setattr(ahead, "_advancing", 1)
    assert engine.run_inline(new_run(alice).pk).status == "completed"
    assert len(seen) == 5 and ahead._advancing == 1
