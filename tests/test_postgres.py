"""The engine's guarantees on a real PostgreSQL (production's database; the rest of the suite
runs on SQLite): two workers racing for one run's stage (only one claims it, one stage
start, one commit), two people deciding one gate at once, event numbers under concurrent
writers, a run through its plan gate and decision, and a worker killed with SIGKILL
mid-stage that a restarted worker recovers without duplicates.

A throwaway cluster (tests/pg.py) serves the module. The cases run this file as a script in
a subprocess whose ``DATABASE_URL`` names a fresh database on that cluster (migrated there),
so the suite's own Django (SQLite, pytest-django) is never touched: the four in-process cases
share one process, the worker case has its own. Without the PostgreSQL server binaries the
tests fail, saying so (CI installs ``postgresql``; see .ci/run).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import pg as pgmod  # noqa: E402

OFFLINE = {"planner": "offline/default", "executor": "offline/default",
           "synthesizer": "offline/default"}
TASK = "Collect the logs, then find the error, and finally write a report."
DROPPED_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "QUORUM_DEFAULT_MODEL",
               "QUORUM_API_BASE", "QUORUM_OFFLINE_LATENCY", "DJANGO_SETTINGS_MODULE")


# --- the pytest side ---------------------------------------------------------------------------
if __name__ != "__main__":
    import pytest

    pytestmark = pytest.mark.integration
    IN_PROCESS = ("claim_race", "decide_race", "event_seq", "gate", "triage_race", "prepared",
                  "nul_review", "history", "history_search", "run_events", "pool",
                  "async_records", "ahead")

    @pytest.fixture(scope="module")
    def cluster():
        """The cluster, or None when PostgreSQL is missing: then every test fails (in its
        body, not as a setup error) saying what to install. Never a skip: CI installs it."""
        if pgmod.missing():
            yield None
            return
        with pgmod.PgCluster(fsync=False, prefix="quorum-pgtest-") as pg:
            yield pg

    def require(cluster) -> None:
        if cluster is None:
            pytest.fail(f"tests/test_postgres.py needs PostgreSQL: {pgmod.missing()}",
                        pytrace=False)

    def run_cases(cluster, database: str, cases: tuple[str, ...], var: Path,
                  timeout: float, *, url: str | None = None,
                  env: dict[str, str] | None = None) -> dict[str, str]:
        """Run ``cases`` in one child process on a new, migrated database (reached at ``url``
        when given: through PgBouncer), its environment plus ``env``; returns each case's
        outcome: "OK" or its traceback."""
        cluster.psql(f'CREATE DATABASE "{database}"', database="postgres")
        url = url or cluster.url.rsplit("/", 1)[0] + "/" + database
        proc = subprocess.Popen([sys.executable, __file__, *cases], cwd=ROOT, text=True,
                                env={**child_env(url, var), **(env or {})},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.terminate()  # SIGTERM: the child stops its worker and Redis on the way out
            try:
                stdout, stderr = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
            stderr += f"\n(stopped after {timeout:.0f} s)"
        results = {}
        for case in cases:
            marker = f"=== {case}: "
            at = stdout.find(marker)
            body = stdout[at + len(marker):].split("\n=== ", 1)[0].strip() if at >= 0 else ""
            if not body.startswith("OK"):
                body = (f"{body or 'no result'} (exit status {proc.returncode})\n"
                        f"{stderr[-5000:]}")
            results[case] = body
        return results

    @pytest.fixture(scope="module")
    def engine_cases(cluster, tmp_path_factory):
        if cluster is None:
            return None
        return run_cases(cluster, "engine", IN_PROCESS, tmp_path_factory.mktemp("pg-engine"),
                         timeout=120)

    def check(results: dict[str, str] | None, case: str) -> str:
        require(results)
        outcome = results[case]
        assert outcome.startswith("OK"), f"{case} failed on PostgreSQL:\n{outcome}"
        return outcome

    def test_two_workers_racing_for_one_stage_only_one_claims_it(engine_cases):
        assert "claims won: 1 of 2 in each of 20 rounds" in check(engine_cases, "claim_race")

    def test_two_decisions_on_one_gate_only_one_applies(engine_cases):
        check(engine_cases, "decide_race")

    def test_concurrent_event_writers_number_events_without_gaps(engine_cases):
        check(engine_cases, "event_seq")

    def test_a_run_through_its_plan_gate_and_decision(engine_cases):
        check(engine_cases, "gate")

    def test_racing_triage_decisions_apply_once_and_never_leave_a_final_verdict_untriaged(
            engine_cases):
        check(engine_cases, "triage_race")

    def test_the_engines_prepared_statements_keep_their_semantics(engine_cases):
        assert "events" in check(engine_cases, "prepared")

    # The engine's statements are prepared on the server only where nothing watches them:
    # DEBUG=false (DEBUG's query log sends them through Django's cursor, as the other cases
    # run). These cases run again that way.
    PREPARED = ("prepared", "claim_race", "decide_race", "event_seq", "gate", "pool", "ahead")

    def test_the_engines_statements_are_prepared_on_the_server_unless_a_pooler_stands_between(
            cluster, tmp_path):
        require(cluster)
        # Without the pool, so that the run and the check share one server session.
        results = run_cases(cluster, "prepared_one", ("server_prepared",), tmp_path,
                            timeout=120, env={"QUORUM_DB_POOL_SIZE": "0", "DEBUG": "false"})
        assert "prepared on the server: commit, record" in check(results, "server_prepared")

    def test_the_engines_cases_hold_with_its_statements_prepared_on_the_server(cluster,
                                                                               tmp_path):
        require(cluster)
        results = run_cases(cluster, "prepared_all", PREPARED, tmp_path, timeout=180,
                            env={"DEBUG": "false"})
        for case in PREPARED:
            check(results, case)

    def test_a_diff_holding_nul_bytes_is_reviewed_and_stored(engine_cases):
        assert "nul_bytes" in check(engine_cases, "nul_review")

    def test_the_history_searches_words_filters_and_sorts_on_postgres(engine_cases):
        outcome = check(engine_cases, "history")
        assert "run_owner_longest" in outcome and "run_owner_cost" in outcome

    def test_the_trigram_search_returns_exactly_what_icontains_returns(engine_cases):
        outcome = check(engine_cases, "history_search")
        assert "run_task_trgm" in outcome
        assert f"terms checked: {len(SEARCH_QUERIES)} " in outcome

    def test_a_runs_page_shows_its_newest_events_and_pages_back(engine_cases):
        assert "events walked: 250" in check(engine_cases, "run_events")

    def test_runs_waiting_on_their_model_hold_no_pooled_connection(engine_cases):
        assert "runs completed: 40 of 40" in check(engine_cases, "pool")

    def test_a_model_calls_record_alone_skips_its_wal_flush(engine_cases):
        assert "SET LOCAL in the 2 call records of their own, none in the 5 stage commits" \
            in check(engine_cases, "async_records")

    def test_a_commit_made_ahead_that_the_server_ends_runs_its_stage_again(engine_cases):
        assert "one ended by the server" in check(engine_cases, "ahead")

    BEHIND_PGBOUNCER = ("claim_race", "decide_race", "event_seq", "gate", "prepared",
                        "history_search", "run_events", "pool", "async_records")

    def test_the_engine_and_the_history_work_behind_pgbouncer_in_transaction_mode(
            cluster, tmp_path):
        """Issue 37: behind a transaction pooler (PgBouncer, pool_mode = transaction, 4 server
        connections) with QUORUM_DB_TRANSACTION_POOLER=true, the migrations, the claims and
        decisions, the history search (its SET LOCAL statement_timeout), the call records'
        SET LOCAL and 40 runs at once on a pool of 4 all work as on PostgreSQL itself."""
        require(cluster)
        if pgmod.pgbouncer_bin() is None:
            pytest.fail(pgmod.PGBOUNCER_HINT, pytrace=False)
        with pgmod.PgBouncer(cluster, pool_size=4) as bouncer:
            results = run_cases(cluster, "bouncer", BEHIND_PGBOUNCER, tmp_path, timeout=240,
                                url=bouncer.url("bouncer"),
                                env={"QUORUM_DB_TRANSACTION_POOLER": "true"})
            log = bouncer.log()
        for case in BEHIND_PGBOUNCER:
            check(results, case)
        # The child's connections were PgBouncer's clients, and its runs are in the database.
        assert "login attempt: db=bouncer" in log, log[-2000:]
        assert cluster.psql("SELECT count(*) FROM agents_app_run", database="bouncer")[0][0] > 40

    def test_worker_killed_mid_stage_recovers_without_duplicates(cluster, tmp_path):
        require(cluster)
        check(run_cases(cluster, "sigkill", ("sigkill",), tmp_path, timeout=150), "sigkill")


    def test_two_hosts_one_killed_mid_stage_the_other_takes_its_runs_without_duplicates(
            cluster, tmp_path):
        require(cluster)
        outcome = check(run_cases(cluster, "twohosts", ("two_hosts",), tmp_path, timeout=150),
                        "two_hosts")
        assert "retaken" in outcome


def child_env(url: str, var: Path) -> dict:
    """The environment of a process using ``url``: real settings, no provider, no network,
    its own folder and Redis port (not the suite's)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTEST") and k not in DROPPED_ENV}
    redis_port = pgmod.free_port()
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "true",
                "SECRET_KEY": "test-secret-key", "DATABASE_URL": url,
                "QUORUM_VAR_DIR": str(var), "QUORUM_TEST_REDIS_PORT": str(redis_port),
                "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
                "QUORUM_ALLOW_MODEL_REQUESTS": "false", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "QUORUM_LLM_RETRY_BASE_DELAY": "0", "QUORUM_LOG_LEVEL": "WARNING",
                "PYTHONUNBUFFERED": "1"})
    return env


# --- the child side: each case runs against the database in DATABASE_URL -----------------------
def _setup():
    from django.db import connection

    assert connection.vendor == "postgresql", connection.vendor
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get_or_create(username="alice")[0]


def _in_threads(n: int, fn) -> list:
    """Run ``fn(i)`` in ``n`` threads released together; each closes its connection."""
    from django.db import connection

    barrier = threading.Barrier(n)
    results: list = [None] * n

    def body(i):
        try:
            barrier.wait()
            results[i] = fn(i)
        except BaseException as exc:  # the caller asserts on it
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def _create(alice, **options):
    from decimal import Decimal

    from agents_app import engine

    return engine.create_run(alice, "plan_execute", TASK, options=options, models=OFFLINE,
                             max_cost_usd=Decimal("1"), max_tokens=100_000, enqueue=False)


def _no_duplicates(run_id: int, steps: int = 3, calls: int = 5) -> None:
    from collections import Counter

    from agents_app.models import Event, ModelCall, Run, StepResult

    assert StepResult.objects.filter(run_id=run_id).count() == steps
    keys = list(ModelCall.objects.filter(run_id=run_id).values_list("stage", "key"))
    assert len(keys) == calls == len(set(keys)), keys
    seqs = list(Event.objects.filter(run_id=run_id).order_by("seq").values_list("seq",
                                                                                flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert Run.objects.get(pk=run_id).last_event_seq == len(seqs)
    assert Run.objects.get(pk=run_id).calls == calls
    kinds = Counter(Event.objects.filter(run_id=run_id).values_list("kind", flat=True))
    assert kinds["plan_proposed"] == 1 and kinds["step_completed"] == steps
    assert kinds["run_finished"] == 1


def case_claim_race() -> None:
    """The lease is a conditional UPDATE: of two transactions claiming one run at the same
    moment, Postgres makes the second wait for the first and then finds the lease taken.
    Then the whole ``advance``: two workers, one stage start, one commit."""
    from django.db import transaction

    from agents_app import engine
    from agents_app.llm.gateway import set_offline_latency
    from agents_app.models import Event, ModelCall, Run

    alice = _setup()
    run = _create(alice, auto_approve=True)
    for round_ in range(20):
        def claim(i, round_=round_):
            with transaction.atomic():
                won = engine.leases.claim(run.pk, f"racer-{i}|r{round_}|0")
                time.sleep(0.02)  # hold the row so the other claim overlaps this one
            return won

        won = _in_threads(2, claim)
        assert all(isinstance(w, bool) for w in won), won
        assert sum(won) == 1, f"round {round_}: {won}"
        owner = Run.objects.values_list("lease_owner", flat=True).get(pk=run.pk)
        assert owner == f"racer-{won.index(True)}|r{round_}|0"
        Run.objects.filter(pk=run.pk).update(lease_owner="", lease_expires_at=None,
                                             stage_attempt=0)
    summary = "claims won: 1 of 2 in each of 20 rounds"

    run = _create(alice, auto_approve=True)
    assert engine.advance(run.pk, enqueue=False)  # "start" (no model call)
    for stage_seq in range(1, 4):  # plan:1, step:1:0, step:1:1: each raced by two workers
        stage = Run.objects.values_list("stage", flat=True).get(pk=run.pk)
        set_offline_latency(0.3)  # the stage outlasts the other worker's attempt
        try:
            moved = _in_threads(2, lambda i: engine.advance(run.pk, enqueue=False))
        finally:
            set_offline_latency(0.0)
        assert sorted(moved) == [False, True], (stage, moved)
        fresh = Run.objects.get(pk=run.pk)
        assert fresh.stage_seq == stage_seq + 1 and fresh.stage != stage, (stage, fresh.stage)
        assert not fresh.lease_owner
        assert Event.objects.filter(run_id=run.pk, kind="stage_started",
                                    data__stage=stage).count() == 1
        assert not Event.objects.filter(run_id=run.pk, kind="stage_resumed").exists()
    assert ModelCall.objects.filter(run_id=run.pk).count() == 3  # planner, two executors
    assert engine.run_inline(run.pk).status == "completed"
    _no_duplicates(run.pk)
    return summary


def case_decide_race() -> None:
    """``decide`` locks the run row (SELECT ... FOR UPDATE) and checks the stage_seq the
    person saw: two approvals of one plan at once, one applies, the other is stale."""
    from agents_app import engine
    from agents_app.models import Approval, Run
    from agents_app.patterns.base import Decision

    alice = _setup()
    for _ in range(5):
        run = engine.run_inline(_create(alice).pk)
        assert run.status == "awaiting_plan_approval", run.status
        seq = run.stage_seq
        outcomes = _in_threads(4, lambda i: engine.decide(
            Run.objects.get(pk=run.pk), alice, seq, Decision("approve", author="alice"),
            enqueue=False))
        applied = [o for o in outcomes if isinstance(o, Run)]
        stale = [o for o in outcomes if isinstance(o, engine.StaleDecision)]
        assert len(applied) == 1 and len(stale) == 3, outcomes
        assert Approval.objects.filter(run_id=run.pk, gate="plan_approval").count() == 1
        assert Run.objects.get(pk=run.pk).stage_seq == seq + 1
        assert engine.run_inline(run.pk).status == "completed"
        _no_duplicates(run.pk)


def case_event_seq() -> None:
    """Events are numbered under a row lock on the run: 8 writers x 25 events, 1..200."""
    from agents_app.events import append_events
    from agents_app.models import Event, Run
    from agents_app.patterns.base import Event as Spec

    alice = _setup()
    run = _create(alice)
    before = Run.objects.get(pk=run.pk).last_event_seq

    def write(i):
        for k in range(25):
            append_events(run.pk, [Spec("note", f"writer {i} event {k}", {"i": i, "k": k})])

    errors = [e for e in _in_threads(8, write) if e is not None]
    assert not errors, errors
    seqs = list(Event.objects.filter(run_id=run.pk).order_by("seq").values_list("seq",
                                                                                flat=True))
    assert seqs == list(range(1, before + 201)), seqs[:10]
    assert Run.objects.get(pk=run.pk).last_event_seq == before + 200
    mine = Event.objects.filter(run_id=run.pk, kind="note").order_by("seq")
    for i in range(8):  # each writer's events in its own order
        ks = [e.data["k"] for e in mine if e.data["i"] == i]
        assert ks == list(range(25)), (i, ks)


def case_gate() -> None:
    """A run stops at its plan gate (nothing executes), an edited plan is approved, and the
    run completes with the edited plan, the decision recorded once."""
    from agents_app import engine
    from agents_app.models import Approval, Event, PlanVersion, StepResult
    from agents_app.patterns.base import Decision

    alice = _setup()
    run = engine.run_inline(_create(alice).pk)
    assert run.status == "awaiting_plan_approval" and run.gate == "plan_approval"
    assert not StepResult.objects.filter(run_id=run.pk).exists()
    stale_seq = run.stage_seq - 1
    try:
        engine.decide(run, alice, stale_seq, Decision("approve", author="alice"), enqueue=False)
        raise AssertionError("a decision on an out-of-date page was applied")
    except engine.StaleDecision:
        pass
    plan = PlanVersion.objects.get(run_id=run.pk, version=1)
    assert len(plan.steps) == 3, plan.steps
    edited = [*plan.steps[:2], "Write a one-line summary of the error."]
    engine.decide(run, alice, run.stage_seq, Decision("approve", edits=edited, author="alice"),
                  enqueue=False)
    run = engine.run_inline(run.pk)
    assert run.status == "completed", (run.status, run.error)
    approvals = list(Approval.objects.filter(run_id=run.pk).values_list(
        "gate", "action", "plan_version", "edited", "user__username"))
    assert approvals == [("plan_approval", "approve", 2, True, "alice")], approvals
    assert list(PlanVersion.objects.filter(run_id=run.pk).order_by("version")
                .values_list("version", flat=True)) == [1, 2]
    steps = list(StepResult.objects.filter(run_id=run.pk).order_by("index")
                 .values_list("plan_version", "description"))
    assert steps == [(2, d) for d in edited], steps
    kinds = list(Event.objects.filter(run_id=run.pk).values_list("kind", flat=True))
    assert kinds.count("gate_opened") == 1 and kinds.count("run_finished") == 1
    assert kinds.index("gate_opened") < kinds.index("step_completed")


def case_sigkill() -> None:
    """A real worker (thread pool) on Postgres is killed with SIGKILL while step 2 runs; the
    restarted worker (same node name) recovers the run's lease, resumes the stage once and
    finishes without a duplicated step, call or event."""
    from agents_app.models import Event, Run, StepResult
    from tests.stack import start_redis, start_worker, wait_until

    alice = _setup()
    var = Path(os.environ["QUORUM_VAR_DIR"])  # the test's tmp_path
    url = os.environ["DATABASE_URL"]
    redis = start_redis(var)
    try:
        first = start_worker(var, node="pgkill", DATABASE_URL=url, QUORUM_OFFLINE_LATENCY="1.0",
                             QUORUM_VAR_DIR=var)
        try:
            from decimal import Decimal

            from agents_app import engine

            run = engine.create_run(alice, "plan_execute", TASK, options={"auto_approve": True},
                                    models=OFFLINE, max_cost_usd=Decimal("1"),
                                    max_tokens=100_000)

            def second_step_in_flight():
                r = Run.objects.get(pk=run.pk)
                return r.stage == "step:1:1" and r.lease_owner and \
                    StepResult.objects.filter(run_id=run.pk).count() == 1

            wait_until(second_step_in_flight, 40, interval=0.05, what="step 2 in flight")
            first.kill()
            stuck = Run.objects.get(pk=run.pk)
            assert stuck.status == "executing" and stuck.lease_owner.startswith("pgkill@")
        finally:
            first.stop()
        second = start_worker(var, node="pgkill", DATABASE_URL=url,
                              QUORUM_OFFLINE_LATENCY="0.1", QUORUM_VAR_DIR=var)
        try:
            wait_until(lambda: Run.objects.values_list("status", flat=True).get(pk=run.pk)
                       == "completed", 40, what="completion after the restart")
        finally:
            second.stop()
    finally:
        redis.stop()
    _no_duplicates(run.pk)
    assert Event.objects.filter(run_id=run.pk, kind="stage_resumed").count() == 1


def case_two_hosts() -> str:
    """Two worker machines (``manage.py worker --hostname hostA`` and ``hostB``, each its own
    process group) share plan-and-execute runs; once both run stages, host A's group gets
    SIGKILL. Host A never comes back, so nothing frees its leases at a restart: they expire
    (an 8 s lease here) and the sweep (``engine.sweep``, the beat's task) requeues the runs
    for host B, which resumes each stage once, replaying the calls journaled, and finishes
    every run without a duplicated step, call or event (tests/faults/two_hosts.py is the
    same at scale, with the real beat)."""
    from decimal import Decimal

    from agents_app import engine
    from agents_app.models import RUNNABLE, Event, Run
    from tests.stack import BIN, Proc, app_env, start_redis, wait_until

    alice = _setup()
    var = Path(os.environ["QUORUM_VAR_DIR"])
    lease = 8.0
    redis = start_redis(var)
    env = app_env(DATABASE_URL=os.environ["DATABASE_URL"], QUORUM_OFFLINE_LATENCY="1.0",
                  QUORUM_STAGE_LEASE_SECONDS=str(lease), QUORUM_VAR_DIR=str(var),
                  QUORUM_DB_POOL_SIZE="4")
    hosts = {h: Proc(h, [str(BIN / "python"), "manage.py", "worker", "--processes", "1",
                         "--concurrency", "20", "--hostname", h, "--", "--without-mingle",
                         "--without-gossip"], env, var) for h in ("hostA", "hostB")}
    try:
        for h, proc in hosts.items():
            wait_until(lambda p=proc: " ready." in p.log() or p.popen.poll() is not None, 90,
                       what=f"{h} to be ready")
            assert proc.popen.poll() is None, proc.log()[-3000:]
            assert f"worker1@{h} ready." in proc.log(), proc.log()[-3000:]
        ids = []
        for _ in range(8):
            ids.append(engine.create_run(alice, "plan_execute", TASK,
                                         options={"auto_approve": True}, models=OFFLINE,
                                         max_cost_usd=Decimal("1"), max_tokens=100_000).pk)
            time.sleep(0.1)

        def holders() -> dict[str, set[int]]:
            out: dict[str, set[int]] = {"hostA": set(), "hostB": set()}
            for pk, owner in Run.objects.filter(pk__in=ids, status__in=RUNNABLE).exclude(
                    lease_owner="").values_list("pk", "lease_owner"):
                out.setdefault(owner.split("|")[0].rpartition("@")[2], set()).add(pk)
            return out

        wait_until(lambda: all(holders().values()), 40, interval=0.05,
                   what="both hosts running stages")
        hosts["hostA"].kill()  # the machine is gone: its group never comes back
        killed = time.monotonic()
        from django.utils import timezone

        killed_at = timezone.now()
        victims = holders()["hostA"]  # its leases stay in the rows until they expire
        assert victims
        deadline = killed + 60
        while time.monotonic() < deadline and Run.objects.filter(pk__in=ids).exclude(
                status="completed").exists():
            engine.sweep(idle_seconds=30)  # the beat's sweep, every second here
            time.sleep(1.0)
        took = time.monotonic() - killed
        assert hosts["hostB"].popen.poll() is None, hosts["hostB"].log()[-3000:]
    finally:
        for proc in hosts.values():
            proc.stop()
        redis.stop()
    statuses = dict(Run.objects.filter(pk__in=ids).values_list("pk", "status"))
    assert set(statuses.values()) == {"completed"}, statuses
    retaken = []
    for run_id in ids:
        _no_duplicates(run_id)
        resumed = Event.objects.filter(run_id=run_id, kind="stage_resumed")
        assert resumed.count() == (1 if run_id in victims else 0), (run_id, victims)
        if run_id in victims:
            retaken.append((resumed.get().created_at - killed_at).total_seconds())
    assert max(retaken) < lease + 20, retaken  # the lease, the sweep's second, a margin
    return (f"{len(victims)} of {len(ids)} runs retaken from hostA after "
            f"{min(retaken):.1f}-{max(retaken):.1f} s; all completed {took:.1f} s after the kill")


def case_triage_race() -> None:
    """Review triage locks the run, then the review (SELECT ... FOR UPDATE): four finalisations
    at once make one version; one finding decided four times at once is recorded once; and a
    finalisation racing an undo never leaves a final verdict over an untriaged finding."""
    from agents_app import engine
    from reviews_app import services
    from reviews_app.models import Review, TriageDecision
    from reviews_app.triage import service as triage
    from tests.review_corpus import GOOD

    engine.scheduling.schedule = lambda run_id, countdown=None: None  # the case closes runs itself
    alice = _setup()
    for _ in range(3):
        inp = services.from_text(GOOD)
        run = engine.run_inline(services.start_review(alice, inp, services.prepare(inp),
                                                      enqueue=False).pk)
        assert run.status == "awaiting_triage", run.error
        review = Review.objects.get(run=run)
        first, *rest = review.findings.filter(kept=True).order_by("position")
        _in_threads(4, lambda i: triage.decide_finding(
            Review.objects.get(pk=review.pk), first.key, alice, "accepted"))
        assert TriageDecision.objects.filter(review=review, kind="accept").count() == 1
        triage.settle_rest(review, "rejected", alice)
        outcomes = _in_threads(4, lambda i: triage.finalise(
            Review.objects.get(pk=review.pk), alice, action="accept", seq=run.stage_seq))
        assert sum(isinstance(o, Review) for o in outcomes) == 1, outcomes
        assert all(isinstance(o, (Review, triage.Refused)) for o in outcomes), outcomes
        assert TriageDecision.objects.filter(review=review, kind="finalise").count() == 1
        assert engine.run_inline(run.pk).status == "completed"
        triage.reopen(review, alice)

        def act(i):
            r = Review.objects.get(pk=review.pk)
            if i % 2:
                return triage.decide_finding(r, first.key, alice, "pending")
            return triage.finalise(r, alice, action="accept", seq=0)

        outcomes = _in_threads(2, act)
        assert not any(isinstance(o, BaseException) and not isinstance(o, triage.Refused)
                       for o in outcomes), outcomes
        review.refresh_from_db()
        pending = review.findings.filter(kept=True, decision="pending").exists()
        assert not (review.final_verdict and pending), (review.final_verdict, outcomes)


def case_prepared() -> str:
    """The engine's hot statements, compiled once with slots (agents_app/prepared.py), on
    PostgreSQL: the checks tests/test_engine_prepared.py runs on SQLite."""
    from tests.prepared_checks import check_prepared_statements

    return check_prepared_statements(_setup())


def case_nul_review() -> str:
    """A diff holding NUL bytes (PostgreSQL's text and jsonb refuse the character), uploaded
    and pasted: reviewed to its triage gate, stored, and the coverage says what was replaced."""
    from agents_app import engine
    from reviews_app import services
    from reviews_app.models import Review
    from tests.review_corpus import GOOD, NUL

    engine.scheduling.schedule = lambda run_id, countdown=None: None  # run inline below
    alice = _setup()
    reasons = set()
    for inp in (services.from_bytes(NUL.encode(), name="nul.diff"), services.from_text(NUL)):
        run = engine.run_inline(services.start_review(alice, inp, services.prepare(inp),
                                                      enqueue=False).pk)
        assert run.status == "awaiting_triage", run.error
        review = Review.objects.get(run=run)
        assert "\x00" not in review.diff_text and "\ufffd" in review.diff_text
        reasons |= {c["reason"] for c in review.coverage}
    assert GOOD.splitlines()[0] in NUL
    return " ".join(sorted(reasons))


def case_history() -> str:
    """The history on PostgreSQL: search words (no trigram index there: the plain scan), the
    status groups, the date, model and cost filters, and every sort paged to the end equal to
    the whole order; the sort indexes exist and a sorted page can be read from them."""
    import datetime as dt
    from decimal import Decimal

    from django.db import connection
    from django.test import RequestFactory
    from django.utils import timezone

    from agents_app.history import history, sort_key
    from agents_app.models import Run

    alice = _setup()
    Run.objects.filter(owner=alice).delete()
    start = timezone.now() - dt.timedelta(days=3)
    for i in range(40):
        run = Run.objects.create(
            owner=alice, pattern="plan_execute", status=["completed", "failed", "executing",
                                                         "awaiting_plan_approval"][i % 4],
            task=f"run {i}" + (" MySQL" if i % 3 == 0 else "") + (" PostgreSQL" if i % 5 == 0 else ""),
            models_used={"planner": "gpt-4o" if i % 2 else "offline/default"},
            cost_usd=Decimal(i % 6) / 100, prompt_tokens=(i % 4) * 10, completion_tokens=i % 3)
        Run.objects.filter(pk=run.pk).update(
            created_at=start + dt.timedelta(hours=i),
            finished_at=None if i % 4 >= 2 else start + dt.timedelta(hours=i, seconds=i % 7))

    factory = RequestFactory()

    def pages(params):
        shown, cursor = [], {}
        for _ in range(20):
            request = factory.get("/", {**params, **cursor})
            request.user = alice
            ctx = history(request)
            assert not ctx["filter_problems"], ctx["filter_problems"]
            shown += [r.pk for r in ctx["runs"]]
            cursor = ctx["next_cursor"]
            if not cursor:
                return shown
        raise AssertionError("too many pages")

    runs = Run.objects.filter(owner=alice)
    both = [r.pk for r in runs.order_by("-id") if "MySQL" in r.task and "PostgreSQL" in r.task]
    assert both and pages({"q": "postgresql mysql"}) == both
    assert set(pages({"status": "all_waiting"})) == set(
        runs.filter(status="awaiting_plan_approval").values_list("id", flat=True))
    assert set(pages({"status": "all_failed"})) == set(
        runs.filter(status="failed").values_list("id", flat=True))
    assert pages({"model": "gpt-4o"}) == list(
        runs.filter(models_used__planner="gpt-4o").order_by("-id").values_list("id", flat=True))
    assert pages({"min_cost": "0.03", "max_cost": "0.04"}) == list(
        runs.filter(cost_usd__in=[Decimal("0.03"), Decimal("0.04")]).order_by("-id")
        .values_list("id", flat=True))
    day = timezone.localdate(start + dt.timedelta(hours=30))
    assert pages({"from": str(day), "to": str(day)}) == [
        r.pk for r in runs.order_by("-id") if timezone.localdate(r.created_at) == day]
    for sort in ("-cost", "cost", "-tokens", "tokens", "-duration", "duration", "started"):
        key = sort_key(sort)
        if key.expression is None:
            order = runs.order_by("-id" if key.descending else "id")
        else:
            order = runs.alias(k=key.expression).order_by(
                *(("-k", "-id") if key.descending else ("k", "id")))
        assert pages({"sort": sort}) == list(order.values_list("id", flat=True)), sort
    unfinished = set(runs.filter(finished_at=None).values_list("id", flat=True))
    assert set(pages({"sort": "duration"})[-len(unfinished):]) == unfinished
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'agents_app_run'")
        names = {row[0] for row in cursor.fetchall()}
        assert {"run_owner_cost", "run_owner_tokens", "run_owner_longest", "run_owner_shortest",
                "run_owner_usage"} <= names, names
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("SET enable_sort = off")
        plans = []
        for sort in ("-cost", "-duration"):
            key = sort_key(sort)
            qs = runs.alias(k=key.expression).order_by("-k", "-id")[:26]
            sql, params = qs.query.sql_with_params()
            cursor.execute("EXPLAIN " + sql, params)
            plans.append(" ".join(row[0] for row in cursor.fetchall()))
        cursor.execute("RESET enable_seqscan")
        cursor.execute("RESET enable_sort")
    assert "run_owner_cost" in plans[0] and "run_owner_longest" in plans[1], plans
    return "plans: " + " | ".join(p[:200] for p in plans)


SEARCH_TEXTS = [
    ("Compare MySQL and PostgreSQL", "PostgreSQL wins"),
    ("Restore the schema from backup", "We restore the schema nightly."),
    ("the schema, restore it", ""),
    ("Progress at 100% done", "50% of the budget"),
    ("rename snake_case names", "a_b and ab"),
    ("Grüße aus München", "ÉCOLE und école"),
    ("日本語のテキストを要約する", "要約: テキスト"),
    ("zq is two letters", "plain"),
    ("ecole without the accent", "e c o l e"),
    ("100 percent", "the underscore_ and % sign"),
]
SEARCH_QUERIES = ["postgresql mysql", '"restore the schema"', "restore the schema", "zq", "ab",
                  "%", "_", "100%", "e_c", "snake_case", "a_b", "grüße", "MÜNCHEN", "école",
                  "ÉCOLE", "テキスト", "要約", "zq postgresql", '"50% of"', "nothing like it",
                  "_ %", '"the underscore_"']


def case_history_search() -> str:
    """Issue 37: the history's search through the pg_trgm GIN indexes of migration 0013
    returns exactly the runs a plain icontains of every word returns — with the index's path
    forced (tiny windows, so every page past the first few runs comes from it), compared with
    the same filter run with index scans off (a sequential scan: no index involved), and with
    what Python finds for the ASCII words: short words, quoted phrases, unicode, and ``%``
    and ``_`` as the characters they are."""
    from django.db import connection, transaction
    from django.test import RequestFactory

    from agents_app import search
    from agents_app.history import history
    from agents_app.models import Run
    from agents_app.search import search_terms, text_filter

    alice = _setup()
    Run.objects.filter(owner=alice).delete()
    for i in range(120):
        task, answer = SEARCH_TEXTS[i % len(SEARCH_TEXTS)]
        Run.objects.create(owner=alice, pattern="plan_execute", task=f"{task} #{i}",
                           answer=answer if i % 3 else "", status="completed" if i % 4 else
                           "failed")
    assert search._search_index_ready()
    window = search.SEARCH_WINDOW
    search.SEARCH_WINDOW = 3  # past the first few runs, every page comes from the index
    factory = RequestFactory()
    runs = Run.objects.filter(owner=alice)

    def walk(q: str) -> list[int]:
        shown, cursor = [], {}
        for _ in range(200):
            request = factory.get("/", {"q": q, **cursor})
            request.user = alice
            ctx = history(request)
            shown += [r.pk for r in ctx["runs"]]
            cursor = ctx["next_cursor"]
            if not cursor:
                return shown
        raise AssertionError(f"{q}: too many pages")

    def slow_index(execute, sql, params, many, context):
        """The index's query made to outlast its statement_timeout (as a phrase of common
        words does on a large history): PostgreSQL cancels it, the search reads on."""
        if "LIKE" in sql and "COALESCE" not in sql and "agents_app_run" in sql:
            slow_index.cancelled += 1
            execute("SELECT pg_sleep(2)", None, False, context)
        return execute(sql, params, many, context)

    slow_index.cancelled = 0
    checked = 0
    for q in SEARCH_QUERIES:
        shown = walk(q)
        terms = search_terms(q)
        with transaction.atomic(), connection.cursor() as c:
            c.execute("SET LOCAL enable_indexscan = off")
            c.execute("SET LOCAL enable_bitmapscan = off")
            truth = list(runs.filter(text_filter(terms)).order_by("-id")
                         .values_list("id", flat=True))
        assert shown == truth, (q, shown[:5], truth[:5])
        if all(t.isascii() for t in terms):
            python = [r.pk for r in runs.order_by("-id") if all(
                t.lower() in r.task.lower() or t.lower() in r.answer.lower() for t in terms)]
            assert shown == python, (q, shown[:5], python[:5])
            checked += 1
    # The index's query cancelled by its time limit: the same runs, read directly instead.
    started = time.monotonic()
    with connection.execute_wrapper(slow_index):
        for q in ("restore the schema", "grüße", "nothing like it"):
            assert walk(q) == list(runs.filter(text_filter(search_terms(q))).order_by("-id")
                                   .values_list("id", flat=True)), q
    assert slow_index.cancelled >= 3 and time.monotonic() - started < 30
    assert checked > 10 and _ids(runs, "%") and _ids(runs, "_")
    assert not set(_ids(runs, "e_c")) & set(_ids(runs, "ecole without")), "_ is a wildcard"
    with connection.cursor() as c:
        c.execute("SET enable_seqscan = off")  # a few rows: a scan would be cheaper
        c.execute("SET enable_indexscan = off")
        sql, params = Run.objects.filter(text_filter(["restore the schema"])).order_by() \
            .values_list("id", flat=True).query.sql_with_params()
        c.execute("EXPLAIN " + sql, params)
        plan = " ".join(row[0] for row in c.fetchall())
        c.execute("RESET enable_seqscan")
        c.execute("RESET enable_indexscan")
    assert "run_task_trgm" in plan and "run_answer_trgm" in plan, plan
    search.SEARCH_WINDOW = window
    return f"terms checked: {len(SEARCH_QUERIES)} ({checked} also against Python); plan: " \
        f"{plan[:300]}"


def _ids(runs, q: str) -> list[int]:
    from agents_app.search import text_filter

    return list(runs.filter(text_filter([q])).values_list("id", flat=True))


def case_run_events() -> str:
    """Issue 37: a run's page shows its newest events; the earlier ones, a page at a time,
    walk back to the first, each once, in order (the (run, seq) index read backwards)."""
    from django.db import connection

    from agents_app import run_page
    from agents_app.models import Event, Run

    alice = _setup()
    run = Run.objects.create(owner=alice, pattern="plan_execute", task="long",
                             status="completed", last_event_seq=250)
    Event.objects.bulk_create([Event(run=run, seq=k, kind="note", message=f"e{k}")
                               for k in range(1, 261)])  # 251..260 not counted yet
    ctx = run_page.run_context(run)
    shown = [e.seq for e in ctx["events"]]
    assert shown == list(range(151, 251)) and ctx["earlier_events"] == 151, shown[:3]
    before = ctx["earlier_events"]
    while before:
        events, before = run_page.events_before(run, before)
        shown = [e.seq for e in events] + shown
    assert shown == list(range(1, 251)), shown[:5]
    with connection.cursor() as c:
        sql, params = run.events.filter(seq__lt=120).order_by("-seq")[:101].query \
            .sql_with_params()
        c.execute("SET enable_seqscan = off")
        c.execute("EXPLAIN " + sql, params)
        plan = " ".join(row[0] for row in c.fetchall())
        c.execute("RESET enable_seqscan")
    assert "Backward" in plan and "Sort" not in plan, plan
    return f"events walked: {len(shown)}; plan: {plan[:200]}"


def case_pool() -> str:
    """Issue 37: 40 runs in 40 threads at once, each model call 0.3 s, on a pool of 4
    connections: a thread gives its connection back before each wait (common/dbpool.py), so
    every run completes and the server never sees more than the pool's connections."""
    import psycopg
    from django.conf import settings
    from django.db import connection

    from agents_app import engine
    from agents_app.llm.gateway import set_offline_latency
    from common import dbpool, turns

    assert dbpool.pooled() and turns._before_wait is dbpool.release
    pool = settings.DATABASES["default"]["OPTIONS"]["pool"]
    assert pool["max_size"] == int(os.environ.get("QUORUM_DB_POOL_SIZE", "10")), pool
    connection.close()
    dbpool.close_pools()
    settings.DATABASES["default"]["OPTIONS"]["pool"] = {**pool, "min_size": 1, "max_size": 4}
    alice = _setup()
    ids = [_create(alice, auto_approve=True).pk for _ in range(40)]
    connection.close()
    peak, done = [0], threading.Event()
    params = connection.get_connection_params()
    dsn = {k: params[k] for k in ("dbname", "user", "host", "port") if k in params}

    def sample():
        with psycopg.connect(**dsn, autocommit=True) as c:
            while not done.is_set():
                n = c.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                              "current_database() AND pid <> pg_backend_pid()").fetchone()[0]
                peak[0] = max(peak[0], n)
                time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    set_offline_latency(0.3)
    try:
        started = time.monotonic()
        assert engine.run_inline(_create(alice, auto_approve=True).pk).status == "completed"
        one = time.monotonic() - started
        started = time.monotonic()
        runs = _in_threads(40, lambda i: engine.run_inline(ids[i]))
        forty = time.monotonic() - started
    finally:
        set_offline_latency(0.0)
        done.set()
        sampler.join()
        dbpool.close_pools()
        settings.DATABASES["default"]["OPTIONS"]["pool"] = pool
    failed = [r for r in runs if not hasattr(r, "status") or r.status != "completed"]
    assert not failed, failed[:3]
    assert peak[0] <= 4, f"{peak[0]} connections to the database with a pool of 4"
    # Holding a connection through its waits, each run would keep one of the 4 for all its
    # calls: ten runs one after another, ~10× one run.
    assert forty < 3 * one, f"40 runs at once took {forty:.1f} s, one run {one:.1f} s"
    return (f"runs completed: {len(runs) - len(failed)} of 40 in {forty:.1f} s (one run "
            f"{one:.1f} s), server connections at most {peak[0]}")


def case_async_records() -> str:
    """Issue 37: each model call's own record (the journal's transaction, for a call written
    before the stage's commit) and only it asks for ``synchronous_commit = off``; claims and
    stage commits, which write a stage's last call, keep waiting for their WAL flush;
    ``QUORUM_DB_ASYNC_CALL_RECORDS = False`` turns it off."""
    from django.conf import settings
    from django.db import connection

    from agents_app import engine
    from agents_app.engine.journal import DbJournal
    from agents_app.llm.gateway import CallOutcome
    from agents_app.models import ModelCall

    alice = _setup()
    seen: list[tuple[bool, str]] = []

    def watch(execute, sql, params, many, context):
        # IDLE before a statement: it begins a transaction (or is one, in autocommit mode).
        import psycopg

        idle = connection.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        seen.append((idle, sql))
        return execute(sql, params, many, context)

    def transactions() -> list[list[str]]:
        """The statements of each transaction, in order (an autocommit statement is one)."""
        groups: list[list[str]] = []
        for begins, sql in seen:
            if begins or not groups:
                groups.append([])
            groups[-1].append(sql)
        return groups

    def one_run() -> int:
        """A run (each of its stages makes one call, which the stage's commit writes), then a
        stage of another run making three calls: the first two are written as the next is
        made, each in a record of its own, the third by nothing here (its commit's)."""
        seen.clear()
        pk = _create(alice, auto_approve=True).pk
        other = _create(alice, auto_approve=True)
        token = engine.leases.lease_token()
        claimed = engine.leases.claim_run(other.pk, token)
        # Commits made ahead (agents_app/engine/ahead.py) are the same transactions on a
        # committer thread's connection, which this thread's wrapper does not watch.
        settings.QUORUM_COMMIT_AHEAD = False
        try:
            with connection.execute_wrapper(watch):
                assert engine.run_inline(pk).status == "completed"
        finally:
            settings.QUORUM_COMMIT_AHEAD = True
        with connection.execute_wrapper(watch):
            journal = DbJournal(claimed, claimed.stage, token)
            for key in ("a", "b", "c"):
                journal.before_call(key, "planner", "offline/default")
                journal.record(key, CallOutcome(role="planner", model="offline/default",
                                                messages=[], response="r"))
        assert [c.key for c in journal.pending] == ["c"]
        return pk

    pk = one_run()
    calls = ModelCall.objects.filter(run_id=pk).count()
    groups = transactions()
    inserting = [g for g in groups if any(
        "agents_app_modelcall" in sql and sql.startswith("INSERT") for sql in g)]
    asked = [g for g in groups if any("synchronous_commit" in sql for sql in g)]
    assert calls == 5 and len(inserting) == calls + 2, (calls, len(inserting), groups)
    assert len(asked) == 2, groups
    for g in asked:  # the SET opens the record's transaction, which inserts the call
        assert g[0] == "SET LOCAL synchronous_commit TO OFF", g
        assert g in inserting, g
    for g in inserting:  # every other call is written by its stage's commit
        assert g in asked or any('"stage_seq" = ' in sql for sql in g), g
    others = [g for g in groups if g not in asked]
    assert any("lease_owner" in " ".join(g) for g in others), "no claim seen"
    settings.QUORUM_DB_ASYNC_CALL_RECORDS = False
    try:
        one_run()
        assert not any("synchronous_commit" in sql for _, sql in seen), seen
    finally:
        settings.QUORUM_DB_ASYNC_CALL_RECORDS = True
    return (f"SET LOCAL in the 2 call records of their own, none in the {calls} stage commits "
            "that wrote their calls, none elsewhere")


def case_ahead() -> str:
    """Issue 37: a stage's commit made ahead (agents_app/engine/ahead.py) whose session the
    server ends just before it writes (``pg_terminate_backend``, as a failover or an
    administrator would): the stage runs again, the next stage started on it is dropped, and
    the run completes with every call recorded once, one resumed stage, no gap in its events;
    the broken connection is not used again."""
    import psycopg
    from django.db import connection

    from agents_app import engine
    from agents_app.engine import ahead
    from agents_app.models import Event, ModelCall

    alice = _setup()
    pk = _create(alice, auto_approve=True).pk
    params = connection.get_connection_params()
    dsn = {k: params[k] for k in ("dbname", "user", "host", "port") if k in params}
    connection.close()
    real, made = ahead.hand_off, []

    def hand_off(write, **kw):
        def end_the_session_once():
            made.append(kw["stage"])
            if len(made) == 2:  # plan:1's commit, which writes the planner's call
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_backend_pid()")
                    pid = cursor.fetchone()[0]
                with psycopg.connect(**dsn, autocommit=True) as other:
                    other.execute("SELECT pg_terminate_backend(%s)", [pid])
            return write()

        return real(end_the_session_once, **kw)

    ahead.hand_off = hand_off
    try:
        run = engine.run_inline(pk)
    finally:
        ahead.hand_off = real
    assert run.status == "completed", (run.status, run.error)
    assert made[:3] == ["start", "plan:1", "plan:1"], made
    keys = list(ModelCall.objects.filter(run=run).values_list("stage", "key"))
    assert len(keys) == len(set(keys)) == run.calls, keys
    assert Event.objects.filter(run=run, kind="stage_resumed").count() == 1
    seqs = list(Event.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    assert engine.run_inline(_create(alice, auto_approve=True).pk).status == "completed"
    return (f"commits made ahead: {len(made)}, one ended by the server; {run.calls} calls "
            "recorded once each; the next run completed")


def case_server_prepared() -> str:
    """The engine's hot statements are prepared on the connection's server session (planned
    once), and run as before: with ``QUORUM_DB_TRANSACTION_POOLER`` none is prepared."""
    from django.conf import settings
    from django.db import connection

    from agents_app import engine

    alice = _setup()

    def prepared() -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements")
            return [row[0] for row in cursor.fetchall()]

    def one_run() -> list[str]:
        """A run in a new session (no pool here: the run keeps it), and what it prepared."""
        connection.close()
        assert prepared() == []
        assert engine.run_inline(_create(alice, auto_approve=True).pk).status == "completed"
        return prepared()

    texts = one_run()
    commit = [t for t in texts if t.startswith('UPDATE "agents_app_run" SET "state"')]
    record = [t for t in texts if t.startswith('INSERT INTO "agents_app_modelcall"')]
    assert commit and record and all("$1" in t for t in commit + record), texts
    settings.QUORUM_DB_TRANSACTION_POOLER = True
    try:
        assert one_run() == []
    finally:
        settings.QUORUM_DB_TRANSACTION_POOLER = False
    return f"{len(texts)} statements prepared on the server: commit, record; none behind a pooler"


if __name__ == "__main__":
    import signal
    import traceback

    # Stopped by the test's timeout: unwind, so the worker and Redis a case started are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    for name in sys.argv[1:]:
        print(f"=== {name}: ", end="", flush=True)
        try:
            summary = globals()[f"case_{name}"]()
        except BaseException:  # reported to the test, which fails with it
            print(f"FAILED\n{traceback.format_exc()}", flush=True)
        else:
            print(f"OK {summary or ''}", flush=True)
