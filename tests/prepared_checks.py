"""What the engine's prepared statements (agents_app/prepared.py) must do, written once for
both databases: tests/test_engine_prepared.py runs it on SQLite, tests/test_postgres.py (case
``prepared``) on PostgreSQL. Each statement is checked for what the ORM version did: the claim
and its conditions, a call's record (exact decimal sums, the lease held or nobody's, an
abandoned attempt refused), every shape of a stage's commit (next, gate, end; fused or not;
the cancel flag in the fused claim), the rows and values read back, and the inserts' defaults.
Needs a configured Django (a database with the app's tables) and a user."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

OFFLINE = {"planner": "offline/default", "executor": "offline/default",
           "synthesizer": "offline/default"}


def check_prepared_statements(owner) -> str:
    from agents_app import engine
    from agents_app.engine import leases
    from agents_app.engine.commit import commit_result
    from agents_app.engine.journal import DbJournal
    from agents_app.events import append_events
    from agents_app.llm.gateway import CallOutcome
    from agents_app.models import Event, ModelCall, Run, Status
    from agents_app.patterns.base import Event as Spec
    from agents_app.patterns.base import Gate, StageResult

    def new_run() -> Run:
        return engine.create_run(owner, "plan_execute", "Collect the logs, then report.",
                                 options={"auto_approve": True}, models=OFFLINE,
                                 max_cost_usd=Decimal("1"), enqueue=False)

    def seqs(run_id: int) -> list[int]:
        return list(Event.objects.filter(run_id=run_id).order_by("seq")
                    .values_list("seq", flat=True))

    # --- the claim: only a runnable run whose lease is free or expired ----------------------
    run = new_run()
    claimed = leases.claim_run(run.pk, "tok|a")
    assert claimed is not None and claimed.lease_owner == "tok|a", claimed
    assert claimed.stage_attempt == 1 and isinstance(claimed.lease_expires_at, datetime)
    assert claimed.lease_expires_at.tzinfo is not None
    assert claimed.options == run.options and claimed.state == run.state
    assert leases.claim_run(run.pk, "tok|b") is None  # held
    Run.objects.filter(pk=run.pk).update(lease_expires_at=claimed.lease_expires_at.replace(
        year=2000))
    again = leases.claim_run(run.pk, "tok|b")  # expired: taken over
    assert again is not None and again.lease_owner == "tok|b" and again.stage_attempt == 2
    assert leases.claim_run(run.pk + 10_000, "tok|c") is None  # no such run

    # --- a call's record: exact decimal sums, one event number each, the lease checked -------
    journal = DbJournal(again, again.stage, "tok|b")
    costs = ["0.000123", "0.0000456", "0.001", "0.1234567"]
    for i, cost in enumerate(costs):
        journal.record(f"k{i}", CallOutcome(
            role="executor", model="offline/default",
            messages=[{"role": "user", "content": f'ünï {i} "quoted"'}],
            response=f"r{i}", prompt_tokens=10 + i, completion_tokens=5, cost_usd=float(cost),
            latency_ms=7, attempts=1))
    assert not ModelCall.objects.filter(run_id=run.pk).exists()  # kept for the stage's commit
    journal.flush()  # what the next call (or a command, or a stop) does first
    row = Run.objects.get(pk=run.pk)
    stored = list(ModelCall.objects.filter(run_id=run.pk).order_by("id"))
    assert [c.key for c in stored] == ["k0", "k1", "k2", "k3"]
    assert [c.cost_usd for c in stored] == [Decimal(c).quantize(Decimal("0.000001"))
                                            for c in costs], [c.cost_usd for c in stored]
    # PostgreSQL rounds each addition to the column's 6 places, SQLite adds exactly: either
    # way within a unit of the last place per call of the exact sum.
    assert abs(row.cost_usd - sum(Decimal(c) for c in costs)) <= Decimal("0.000004"), row.cost_usd
    assert (row.prompt_tokens, row.completion_tokens, row.calls) == (46, 20, 4)
    assert stored[1].messages == [{"role": "user", "content": 'ünï 1 "quoted"'}]
    assert stored[0].created_at is not None and stored[0].retryable is False
    assert seqs(run.pk) == list(range(1, row.last_event_seq + 1))
    assert Event.objects.filter(run_id=run.pk, kind="model_call").count() == 4
    stale = DbJournal(again, again.stage, "tok|a")  # an abandoned attempt's call
    try:
        stale.record("late", CallOutcome(role="executor", model="offline/default",
                                         messages=[], cost_usd=5.0))
        stale.flush()
        raise AssertionError("a call of an abandoned attempt was recorded")
    except leases.LeaseLost:
        pass
    assert Run.objects.get(pk=run.pk).calls == 4
    assert not ModelCall.objects.filter(run_id=run.pk, key="late").exists()

    # --- commits: next (fused and not), gate, end; only while the lease and stage hold ------
    fresh = Run.objects.get(pk=run.pk)
    seq = fresh.stage_seq
    # The stage's last call is written by its commit: counted, journaled, its event first.
    journal.record("k4", CallOutcome(role="executor", model="offline/default", messages=[],
                                     response="r4", prompt_tokens=3, completion_tokens=2,
                                     cost_usd=0.5, latency_ms=7, attempts=1))
    moved = commit_result(fresh, "tok|b", seq, StageResult(
        state={**fresh.state, "mark": [1, "ü"]}, next_stage="plan:1",
        events=[Spec("note", "one", {"x": 1})]), 0.25, False, next_token="tok|n",
        journal=journal)
    assert moved and moved.claimed_by == "tok|n" and moved.run is not None
    committed = moved.run
    if moved.ahead is not None:  # made by a committer thread (engine/ahead.py)
        predicted, committed = committed, moved.ahead.settle()
        # The next stage ran from the prediction: it must be the run as committed.
        for name in ("stage", "gate", "status", "stage_seq", "stage_attempt", "lease_owner",
                     "lease_expires_at", "state", "prompt_tokens",
                     "completion_tokens", "cancel_requested", "models_used", "options"):
            assert getattr(predicted, name) == getattr(committed, name), name
        assert abs(predicted.active_seconds - committed.active_seconds) < 1e-9
        # Within a unit of the last place per call (see above): the database rounds each sum.
        assert abs(predicted.cost_usd - committed.cost_usd) <= Decimal("0.000005")
    assert not journal.pending and committed.calls == 5
    assert (committed.prompt_tokens, committed.completion_tokens) == (49, 22)
    assert committed.cost_usd == fresh.cost_usd + Decimal("0.5")
    assert ModelCall.objects.get(run_id=run.pk, key="k4").stage == fresh.stage
    assert list(Event.objects.filter(run_id=run.pk, seq__gt=fresh.last_event_seq)
                .order_by("seq").values_list("kind", flat=True))[:2] == ["model_call", "note"]
    assert committed.stage == "plan:1" and committed.stage_seq == seq + 1
    assert committed.lease_owner == "tok|n" and committed.stage_attempt == 1
    assert committed.state["mark"] == [1, "ü"] and committed.status == Status.PLANNING
    assert abs(committed.active_seconds - (fresh.active_seconds + 0.25)) < 1e-9
    assert committed == Run.objects.get(pk=run.pk)
    db = Run.objects.get(pk=run.pk)
    for field in Run._meta.concrete_fields:  # the row read back is the row
        assert getattr(committed, field.attname) == getattr(db, field.attname), field.name
    assert seqs(run.pk) == list(range(1, db.last_event_seq + 1))
    kinds = list(Event.objects.filter(run_id=run.pk).order_by("-seq")
                 .values_list("kind", flat=True)[:2])
    assert kinds == ["stage_started", "note"], kinds  # the fused claim starts the next stage
    # the old token and the old stage match nothing
    assert not commit_result(committed, "tok|b", seq + 1, StageResult(
        state={}, next_stage="synthesize"), 0.0, False)
    assert not commit_result(committed, "tok|n", seq, StageResult(
        state={}, next_stage="synthesize"), 0.0, False)

    # a cancel asked for before the fused claim: claimed, numbered without a start event
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    before = Run.objects.get(pk=run.pk).last_event_seq
    moved = commit_result(committed, "tok|n", seq + 1, StageResult(
        state=committed.state, next_stage="step:1:0"), 0.0, False, next_token="tok|m")
    assert moved.run is not None and moved.run.cancel_requested
    assert moved.run.last_event_seq == before  # no event at all
    assert seqs(run.pk) == list(range(1, before + 1))
    Run.objects.filter(pk=run.pk).update(cancel_requested=False)

    gated = commit_result(moved.run, "tok|m", seq + 2, StageResult(
        state=moved.run.state, gate=Gate("plan_approval", {"plan_version": 1}),
        next_stage="step:1:0"), 0.0, False, next_token="tok|z")
    assert not gated and gated.claimed_by == ""  # a gate is not runnable: nothing claimed
    waiting = Run.objects.get(pk=run.pk)
    assert waiting.gate == "plan_approval" and waiting.stage == "step:1:0"
    assert waiting.lease_owner == "" and waiting.lease_expires_at is None
    last = Event.objects.filter(run_id=run.pk).order_by("-seq").first()
    assert last is not None and last.kind == "gate_opened" and last.data["plan_version"] == 1

    Run.objects.filter(pk=run.pk).update(lease_owner="tok|e", gate="", status="executing")
    ended = commit_result(Run.objects.get(pk=run.pk), "tok|e", seq + 3, StageResult(
        state={"done": True}, outcome="completed", answer="The answer."), 1.0, False,
        next_token="tok|y")
    done = Run.objects.get(pk=run.pk)
    assert not ended and done.status == Status.COMPLETED and done.answer == "The answer."
    assert done.finished_at is not None and done.stage == "" and done.lease_owner == ""
    assert seqs(run.pk) == list(range(1, done.last_event_seq + 1))

    # --- event numbering with a status set in the same UPDATE ----------------------------------
    other = new_run()
    n = Run.objects.get(pk=other.pk).last_event_seq
    append_events(other.pk, [Spec("a", "1"), Spec("b", "2")], status="planning")
    append_events(other.pk, [Spec("c", "3")])
    got = Run.objects.get(pk=other.pk)
    assert got.status == "planning" and got.last_event_seq == n + 3
    assert seqs(other.pk) == list(range(1, n + 4))
    try:
        append_events(other.pk + 10_000, [Spec("a", "1")])
        raise AssertionError("events written for a run that does not exist")
    except Run.DoesNotExist:
        pass
    return f"cost {done.cost_usd}, {done.last_event_seq} events"
