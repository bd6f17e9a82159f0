"""The history at 1,000,000 runs on PostgreSQL (issue 37): list, filters, sorts, search and a
run's page, server time per request, with EXPLAIN of the slow statements.

A throwaway PostgreSQL cluster (tests/pg.py, fsync off, shared_buffers 1 GB) is migrated
from scratch and filled with bulk SQL (``INSERT … SELECT`` over ``generate_series``, as
``bench_inbox.py`` does), timed: 100 people; one of them (alice, in no team) owns a quarter of
the runs, a team of ten (bob among them) a tenth, the rest are the other people's personal
runs. ``--runs`` runs over two years, patterns, statuses (mostly finished, some failed, some
waiting at a gate), models and costs mixed as in ``bench_history.py``; tasks and answers made
from the same word list (a task 60–600 characters, with "postgres" in 5 % of them and
"zetaquartz" in 0.05 %; an answer of 200–2,000 characters for a completed run); a pattern
state of ~1 KB; merge requests for the change runs. Every run has ``--events-per-run``
events, and ``--heavy-runs`` runs (evenly spread; alice's among them) ``--heavy-events``
each, with two model calls. The trigram indexes of migration 0013 are dropped before the fill
and built after it (timed: what the migration costs on an existing history).

Cases, ``--requests`` each (after a warm-up), through Django's test client (the whole
middleware stack, the session, the template; DEBUG=false): the cases of ``bench_history.py``
for alice, the history of bob (a team's member: his personal runs or the team's), and the
run page of alice's runs with 1,000 events and its "earlier events". Searches and sorted
pages are checked against a plain query over every run of alice.

    .venv/bin/python tests/benchmarks/bench_history_pg.py [--runs 1000000] [--requests 40]
        [--events-per-run 5] [--heavy-runs 10000] [--heavy-events 1000] [--explain]

``--explain`` prints EXPLAIN (ANALYZE, BUFFERS) of every statement slower than
``--explain-ms`` in one request of each case.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.benchmarks import bench_history as hist  # noqa: E402
from tests.benchmarks.common import machine, pct, positive, settings_note  # noqa: E402

TARGET_MS = 150.0
PEOPLE = 100
ALICE_SHARE = 0.25  # alice's personal runs
TEAM_SHARE = 0.10  # the team's runs (its ten people's)
TEAM_SIZE = 10
PARAGRAPHS = 400
SERVER = {"shared_buffers": "1GB", "maintenance_work_mem": "512MB", "work_mem": "16MB",
          "effective_cache_size": "4GB", "max_wal_size": "8GB", "checkpoint_timeout": "30min",
          "random_page_cost": "1.1"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=positive(int, 10_000, 10_000_000), default=1_000_000)
    p.add_argument("--events-per-run", type=positive(int, 0, 100), default=5)
    p.add_argument("--heavy-runs", type=positive(int, 0, 1_000_000), default=10_000)
    p.add_argument("--heavy-events", type=positive(int, 10, 100_000), default=1_000)
    p.add_argument("--requests", type=positive(int, 1, 10_000), default=40)
    p.add_argument("--case-budget", type=positive(float, 1.0, 3600.0), default=30.0,
                   help="stop a case's requests after this many seconds")
    p.add_argument("--explain", action="store_true")
    p.add_argument("--explain-ms", type=positive(float, 0.0, 10_000.0), default=20.0)
    p.add_argument("--hold", action="store_true",
                   help="build, print the database's URL and keep the cluster up until "
                        "interrupted (for --database-url)")
    p.add_argument("--database-url", default="",
                   help="measure a database built by --hold instead of building one")
    p.error = lambda message: p.exit(2, f"bench_history_pg: {message}\n")
    return p.parse_args(argv)


# --- the data --------------------------------------------------------------------------------
def lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def arr(values) -> str:
    return "ARRAY[" + ", ".join(lit(v) for v in values) + "]::text[]"


def weighted(expr: str, mix) -> str:
    """CASE over ``expr`` (uniform in [0, 1)) picking each choice by its weight."""
    total = sum(w for _, w in mix)
    acc, parts = 0, []
    for value, weight in mix[:-1]:
        acc += weight
        parts.append(f"WHEN {expr} < {acc / total:.6f} THEN {lit(value)}")
    return "CASE " + " ".join(parts) + f" ELSE {lit(mix[-1][0])} END"


def pick(array: str, n: int, expr: str) -> str:
    return f"({array})[1 + floor({expr} * {n})::int]"


def build(args, cursor) -> dict:
    """Fill the database (see the module's docstring); returns timings and the ids the cases
    need."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password

    from agents_app.teams.models import Membership, Team

    User = get_user_model()
    t0 = time.monotonic()
    password = make_password("bench-password-123")
    names = ["alice", "bob"] + [f"p{i:03d}" for i in range(2, PEOPLE)]
    User.objects.bulk_create([User(username=n, password=password) for n in names])
    uid = {u.username: u.pk for u in User.objects.all()}
    ids = [uid[n] for n in names]
    assert ids == list(range(ids[0], ids[0] + PEOPLE)), "user ids are not contiguous"
    u0 = ids[0]
    team = Team.objects.create(name="Platform")
    Membership.objects.bulk_create([Membership(team=team, user_id=u0 + 1 + k,
                                               role="admin" if k == 0 else "member")
                                    for k in range(TEAM_SIZE)])  # bob and nine others

    rng = random.Random(37)  # noqa: S311 - benchmark data
    pool = hist.TextPool(rng, PARAGRAPHS)
    paras = arr(pool.paragraphs)
    verbs, subjects, tails = arr(hist.VERBS), arr(hist.SUBJECTS), arr(hist.TAILS)
    models = arr(hist.MODELS)
    n = args.runs
    span = 730 * 86400
    step = span / n
    now = dt.datetime.now(dt.UTC)
    base = lit((now - dt.timedelta(days=730)).strftime("%Y-%m-%d %H:%M:%S+00"))
    heavy_every = max(1, n // args.heavy_runs) if args.heavy_runs else 0
    finished_statuses = ("completed", "failed", "cancelled", "budget_exceeded")
    roles = " ".join(
        f"WHEN {lit(p)} THEN jsonb_build_object({', '.join(f'{lit(r)}, m' for r in rs)})"
        for p, rs in hist.ROLES.items())
    # r: one uniform number per row and purpose (random() again in each CASE branch would
    # draw anew).
    draws = ", ".join(f"random() + 0 * g.i AS r{k}" for k in range(16))
    heavy = f"(g.i % {heavy_every} = 0)" if heavy_every else "FALSE"
    cursor.execute("DROP INDEX IF EXISTS run_task_trgm")
    cursor.execute("DROP INDEX IF EXISTS run_answer_trgm")
    cursor.execute("SET work_mem = '64MB'")
    statement = f"""
    INSERT INTO agents_app_run (owner_id, team_id, pattern, task, status, stage, gate, state,
        options, models_used, offline, max_cost_usd, max_tokens, cost_usd, prompt_tokens,
        completion_tokens, calls, stage_seq, stage_attempt, lease_owner, lease_expires_at,
        cancel_requested, active_seconds, last_event_seq, answer, error, created_at, updated_at,
        finished_at, forked_from_id, fork_seq, root_id, fork, experiment_id, cell_id, item_id,
        repetition)
    SELECT owner_id, team_id, pattern, task, status,
        CASE WHEN finished THEN '' ELSE 'round:1' END,
        CASE WHEN status LIKE 'awaiting_%' THEN substr(status, 10) ELSE '' END,
        jsonb_build_object('task', '…', 'options', jsonb_build_object('max_rounds', 3),
                           'notes', left(note, 1000)),
        '{{"max_rounds": 3}}'::jsonb,
        CASE pattern {roles} END, m = 'offline/default', 1.0, 200000,
        round((r5 * 0.9)::numeric, 6), p_tok, c_tok, 1 + floor(r6 * 25)::int, 3, 0, '', NULL,
        FALSE, 0, CASE WHEN is_heavy THEN {args.heavy_events} ELSE {args.events_per_run} END,
        CASE WHEN status = 'completed' THEN left(ans, 200 + floor(r7 * 1800)::int) ELSE '' END,
        CASE WHEN status = 'failed' THEN 'The model call failed after 3 attempts: 503'
             ELSE '' END,
        created, COALESCE(finished_at, created), finished_at,
        NULL, NULL, NULL, '{{}}'::jsonb, NULL, NULL, NULL, NULL
    FROM (
        SELECT *, CASE WHEN finished THEN created + (5 + floor(r8 * 895)) * INTERVAL '1 second'
                  END AS finished_at,
               floor(800 + r9 * 39200)::int AS p_tok, floor(200 + r10 * 7800)::int AS c_tok
        FROM (
            SELECT g.i,
                CASE WHEN r0 < {ALICE_SHARE} THEN {u0}
                     WHEN r0 < {ALICE_SHARE + TEAM_SHARE} THEN {u0 + 1} + floor(r1 * {TEAM_SIZE})::int
                     ELSE {u0 + 1} + floor(r1 * {PEOPLE - 1})::int END AS owner_id,
                CASE WHEN r0 >= {ALICE_SHARE} AND r0 < {ALICE_SHARE + TEAM_SHARE} THEN {team.pk}
                     END AS team_id,
                CASE WHEN {heavy} THEN 'plan_execute' ELSE {weighted('r2', hist.PATTERN_MIX)}
                     END AS pattern,
                CASE WHEN {heavy} THEN 'completed' ELSE {weighted('r3', hist.STATUS_MIX)}
                     END AS status,
                {heavy} AS is_heavy,
                {pick(models, len(hist.MODELS), 'r4')} AS m,
                {pick(verbs, len(hist.VERBS), 'r12')} || ' ' || {pick(subjects, len(hist.SUBJECTS), 'r13')}
                    || ', ' || {pick(tails, len(hist.TAILS), 'r14')} || '.'
                    || CASE WHEN r15 < 0.05 THEN ' Consider {hist.SEARCH_COMMON} for the storage.'
                            ELSE '' END
                    || CASE WHEN r6 < 0.0005 THEN ' Code name {hist.SEARCH_RARE}.' ELSE '' END
                    || CASE WHEN r7 < 0.6 THEN ' ' || left({pick(paras, PARAGRAPHS, 'r8')},
                                                           30 + floor(r9 * 500)::int)
                            ELSE '' END
                    || ' (ticket ' || g.i || ')' AS task,
                {pick(paras, PARAGRAPHS, 'r10')} || E'\\n\\n' || {pick(paras, PARAGRAPHS, 'r11')}
                    || E'\\n\\n' || {pick(paras, PARAGRAPHS, 'r4')} AS ans,
                {pick(paras, PARAGRAPHS, 'r9')} AS note,
                CAST({base} AS timestamptz) + (g.i * {step:.6f}) * INTERVAL '1 second' AS created,
                r5, r6, r7, r8, r9, r10, r11
            FROM generate_series(1, {n}) AS g(i), LATERAL (SELECT {draws}) AS d
        ) AS a,
        LATERAL (SELECT a.status IN {tuple(finished_statuses)} AS finished) AS f
    ) AS b
    ORDER BY i"""
    cursor.execute(statement)
    t_runs = time.monotonic() - t0
    cursor.execute(
        "INSERT INTO agents_app_mergerequest (run_id, repo, base_branch, branch, base_sha, "
        "head_sha, merged_sha, status, message, decided_by_id, decided_at, updated_at) "
        "SELECT id, '/srv/repos/app', 'main', 'quorum/run-' || id, '', '', '', "
        "(ARRAY['open', 'merged', 'discarded', 'draft'])[1 + id % 4], '', NULL, NULL, "
        "updated_at FROM agents_app_run WHERE pattern = 'plan_execute_review'")
    t1 = time.monotonic()
    kinds = arr(["stage_started", "model_call", "step_completed", "model_call", "note"])
    for where, count in ((f"last_event_seq = {args.events_per_run}", args.events_per_run),
                         (f"last_event_seq = {args.heavy_events}", args.heavy_events)):
        if not count:
            continue
        cursor.execute(
            "INSERT INTO agents_app_event (run_id, seq, kind, message, data, created_at) "
            f"SELECT r.id, s.k, CASE WHEN s.k = 1 THEN 'run_started' WHEN s.k = {count} THEN "
            f"'run_finished' ELSE ({kinds})[1 + s.k % 5] END, "
            "'Step ' || s.k || ': the executor finished its work on the task and reported back', "
            "CASE WHEN s.k % 50 = 0 THEN '{\"step\": 1, \"tokens\": 1200}'::jsonb "
            "ELSE '{}'::jsonb END, r.created_at + s.k * INTERVAL '1 second' "
            f"FROM agents_app_run r, generate_series(1, {count}) AS s(k) WHERE r.{where} "
            "ORDER BY r.id, s.k")
    t_events = time.monotonic() - t1
    cursor.execute(
        "INSERT INTO agents_app_modelcall (run_id, stage, key, role, model, messages, response, "
        "prompt_tokens, completion_tokens, cost_usd, latency_ms, attempts, error, retryable, "
        "replayed_from_id, created_at) SELECT r.id, 's:' || k, 'planner', 'planner', "
        "'gpt-4o-mini', '[{\"role\": \"user\", \"content\": \"Plan the work.\"}]'::jsonb, "
        "'The plan.', 1000, 200, 0.001, 900, 1, '', FALSE, NULL, r.created_at "
        f"FROM agents_app_run r, generate_series(1, 2) AS k WHERE r.last_event_seq = "
        f"{args.heavy_events}")
    t_fill = time.monotonic() - t0
    cursor.execute("SET maintenance_work_mem = '512MB'")
    t2 = time.monotonic()
    from importlib import import_module

    import_module("agents_app.migrations.0013_history_postgres_search").create(
        None, type("Editor", (), {"connection": cursor.db})())
    t_trgm = time.monotonic() - t2
    cursor.execute("VACUUM ANALYZE")
    t_all = time.monotonic() - t0
    return {"alice": u0, "bob": u0 + 1, "team": team.pk, "fill_runs_s": t_runs,
            "events_s": t_events, "fill_s": t_fill, "trgm_s": t_trgm,
            "vacuum_s": t_all - t_fill - t_trgm, "all_s": t_all}


def sizes(cursor) -> dict:
    out = {}
    for table in ("agents_app_run", "agents_app_event", "agents_app_modelcall"):
        cursor.execute(f"SELECT count(*), pg_total_relation_size('{table}') FROM {table}")  # noqa: S608
        out[table] = cursor.fetchone()
    for index in ("run_task_trgm", "run_answer_trgm"):
        cursor.execute("SELECT pg_relation_size(%s)", [index])
        out[index] = cursor.fetchone()[0]
    cursor.execute("SELECT pg_database_size(current_database())")
    out["database"] = cursor.fetchone()[0]
    return out


# --- the cases -------------------------------------------------------------------------------
HTMX = {"HX-Request": "true", "HX-Target": "history"}


def run_cases(heavy: list[int]) -> list[tuple[str, callable]]:
    """(name, request(client, rng)) of a run's page."""
    def page(c, r):
        return c.get(f"/runs/{r.choice(heavy)}/")

    def earlier(c, r):
        run = r.choice(heavy)
        return c.get(f"/runs/{run}/events/", {"before": r.randint(200, 900)},
                     headers={"HX-Request": "true"})

    def every(c, r):  # the page as it was before issue 37: every event drawn
        from agents_app import run_page

        shown, run_page.EVENTS_SHOWN = run_page.EVENTS_SHOWN, 10**9
        try:
            return page(c, r)
        finally:
            run_page.EVENTS_SHOWN = shown

    return [("run page: a run with 1,000 events (its newest 100 shown)", page),
            ("run page: the same, every event drawn (as before issue 37)", every),
            ("run page: earlier events (htmx, 100 before a seq)", earlier)]


def measure(client, request, n: int, budget: float, rng) -> tuple[list[float], int, dict]:
    """Wall time per request (ms), how many pages said the search paused, and per request:
    this process's CPU (``cpu``), the time spent waiting on the database's statements (``db``)
    and the statements (``statements``)."""
    from django.db import connection

    request(client, rng)  # warm-up
    times, t_case, paused = [], time.perf_counter(), 0
    extra: dict = {"cpu": [], "db": [], "statements": []}
    waits: list[float] = []

    def wrapper(execute, sql, params, many, context):
        t = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            waits.append((time.perf_counter() - t) * 1000)

    for _ in range(n):
        waits.clear()
        t, c = time.perf_counter(), time.process_time()
        with connection.execute_wrapper(wrapper):
            resp = request(client, rng)
        times.append((time.perf_counter() - t) * 1000)
        extra["cpu"].append((time.process_time() - c) * 1000)
        extra["db"].append(sum(waits))
        extra["statements"].append(len(waits))
        assert resp.status_code == 200, resp.status_code
        paused += hist.PAUSED in resp.content.decode()
        if time.perf_counter() - t_case > budget:
            break
    return times, paused, extra


def main(argv=None) -> None:
    args = parse_args(argv)
    from tests import pg

    if pg.missing():
        sys.exit(f"bench_history_pg: {pg.missing()}")
    with tempfile.TemporaryDirectory(prefix="quorum-bench-hist1m-") as tmp, \
            contextlib.ExitStack() as cleanup:
        cluster = None
        if not args.database_url:
            cluster = cleanup.enter_context(pg.PgCluster(fsync=False, settings=SERVER,
                                                         prefix="quorum-bench-hist1m-pg-"))
        from tests.benchmarks.common import setup_django
        from tests.stack import free_port

        setup_django(Path(tmp), free_port(), ALLOWED_HOSTS="127.0.0.1,localhost,testserver",
                     DATABASE_URL=args.database_url or cluster.url)
        report(args, cluster)


def report(args, cluster) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from agents_app.models import Run
    from tests.benchmarks.bench_inbox import explain

    print(f"# load before the build: {uptime()}", flush=True)
    with connection.cursor() as cursor:
        if cluster is not None:
            built = build(args, cursor)
        else:  # built by another run with --hold
            cursor.execute("SELECT u.id, m.team_id FROM auth_user u JOIN agents_app_membership m"
                           " ON m.user_id = u.id WHERE u.username = 'bob'")
            bob_id, team_id = cursor.fetchone()
            built = {"alice": bob_id - 1, "bob": bob_id, "team": team_id, "all_s": 0,
                     "fill_runs_s": 0, "events_s": 0, "fill_s": 0, "trgm_s": 0, "vacuum_s": 0}
        size = sizes(cursor)
        cursor.execute("SELECT version()")
        version = cursor.fetchone()[0].split(" on ")[0]
    disk = sum(f.stat().st_size for f in cluster.data.rglob("*") if f.is_file()) \
        if cluster is not None else 0
    print(f"# built in {built['all_s']:.0f} s: runs {built['fill_runs_s']:.0f} s, events "
          f"{built['events_s']:.0f} s, fill in all {built['fill_s']:.0f} s, trigram indexes "
          f"{built['trgm_s']:.0f} s, VACUUM ANALYZE {built['vacuum_s']:.0f} s; "
          f"{describe(size)}; data folder {disk / 1e9:.1f} GB", flush=True)
    if args.hold:
        import signal

        print(f"# holding {cluster.url} (Ctrl-C or SIGTERM to stop)", flush=True)
        # SIGTERM unwinds too (a background job ignores SIGINT): the cluster is stopped and
        # its folder removed on the way out.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
        return
    User = get_user_model()
    alice, bob = User.objects.get(pk=built["alice"]), User.objects.get(pk=built["bob"])
    ids = list(Run.objects.filter(owner=alice).order_by("-id").values_list("id", flat=True))
    heavy = list(Run.objects.filter(owner=alice, last_event_seq=args.heavy_events)
                 .values_list("id", flat=True))
    clients = {}
    for who, user in (("alice", alice), ("bob", bob)):
        clients[who] = Client()
        clients[who].force_login(user)
    bob_runs = list(Run.objects.filter(team_id=built["team"]).order_by("-id")
                    .values_list("id", flat=True))
    cases = [(f"alice: {name}", "alice",
              lambda c, r, p=params, h=htmx: c.get("/", p(r), headers=HTMX if h else {}))
             for name, params, htmx in hist.cases(ids)]
    cases += [(f"bob (a team's member): {name}", "bob",
               lambda c, r, p=params: c.get("/", p(r), headers=HTMX))
              for name, params, _ in hist.cases(bob_runs)
              if name in ("history: first page (htmx partial)",
                          "history: a later page (keyset cursor)", "history: status = failed",
                          "history: status = awaiting plan approval (rare)",
                          "history: sort = cost, a later page",
                          f"history: q = {hist.SEARCH_RARE} (0.05% of runs)")]
    cases += [(name, "alice", request) for name, request in run_cases(heavy)]
    rng = random.Random(1)  # noqa: S311
    rows = []
    print(f"# load before the cases: {uptime()}", flush=True)
    for name, who, request in cases:
        times, paused, extra = measure(clients[who], request, args.requests, args.case_budget,
                                       rng)
        rows.append((name, len(times), pct(times, 50), pct(times, 95), paused,
                     pct(extra["db"], 50), pct(extra["db"], 95), pct(extra["cpu"], 50),
                     max(extra["statements"])))
        print(f"# {name}: p50 {pct(times, 50):.1f} ms, p95 {pct(times, 95):.1f} ms, database "
              f"p50 {pct(extra['db'], 50):.1f} ms p95 {pct(extra['db'], 95):.1f} ms, CPU here "
              f"p50 {pct(extra['cpu'], 50):.1f} ms"
              + (f", search paused {paused}/{len(times)}" if paused else ""), flush=True)
        if args.explain:
            explain(lambda c=clients[who], q=request: q(c, random.Random(2)),  # noqa: S311
                    "postgresql", args.explain_ms)
    load_after = uptime()
    problems = hist.verify_search(alice, [
        {"q": q} for q in (hist.SEARCH_COMMON, hist.SEARCH_RARE, hist.SEARCH_ABSENT,
                           hist.SEARCH_PHRASE, hist.SEARCH_PHRASE_QUOTED, hist.SEARCH_WORDS,
                           hist.SEARCH_SHORT, "WE SHOULD", '"ticket 1999)"')] + [
        {"q": q, "status": st} for q in (hist.SEARCH_COMMON, hist.SEARCH_RARE, "we should")
        for st in ("failed", "awaiting_plan_approval")])
    print(f"# search pages against a plain icontains: {problems or 'all equal'}", flush=True)
    sort_problems = hist.verify_sorts(alice, ids)
    sort_problems += verify_team_sorts(bob, bob_runs)
    print(f"# sorted pages (alice's and bob's) against the whole order: "
          f"{sort_problems or 'all equal'}", flush=True)
    problems += sort_problems

    print()
    print(f"# History at {args.runs:,} runs — {machine()}, PostgreSQL ({version}), "
          f"{settings_note()}, server {json.dumps(SERVER)}")
    print(f"# built in {built['all_s']:.0f} s (runs {built['fill_runs_s']:.0f} s, events "
          f"{built['events_s']:.0f} s, trigram indexes {built['trgm_s']:.0f} s, VACUUM ANALYZE "
          f"{built['vacuum_s']:.0f} s); {describe(size)}; data folder {disk / 1e9:.1f} GB")
    print(f"# alice {len(ids):,} runs, bob sees {len(bob_runs):,} of the team's and his own; "
          f"{len(heavy)} of alice's runs have {args.heavy_events:,} events; load after the "
          f"cases: {load_after}")
    print()
    print("| case | n | p50 | p95 | target p95 ≤ 150 ms | database p50 | p95 | CPU here p50 "
          "| statements | search paused |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for name, n, p50, p95, paused, db50, db95, cpu50, statements in rows:
        print(f"| {name} | {n} | {p50:.1f} ms | {p95:.1f} ms | "
              f"{'met' if p95 <= TARGET_MS else '**missed**'} | {db50:.1f} ms | {db95:.1f} ms | "
              f"{cpu50:.1f} ms | {statements} | "
              f"{f'{paused}/{n}' if 'q =' in name or 'model =' in name else '—'} |")
    print()
    print(f"Search results page by page equal to a plain icontains, sorted pages equal to the "
          f"whole order: {'yes' if not problems else 'NO ' + str(problems)}")
    if problems:
        sys.exit(1)


def verify_team_sorts(user, ids: list[int], pages: int = 4) -> list[str]:
    """A team member's sorted pages (his personal runs' and the team's, merged) from the top
    and from a run deep in the order, against the whole order of every run he may see."""
    from agents_app.history import sort_key
    from agents_app.models import Run
    from agents_app.teams.access import visible

    rng = random.Random(4)  # noqa: S311
    problems = []
    for sort in ("-cost", "cost", "-tokens", "tokens", "-duration", "duration"):
        key = sort_key(sort)
        runs = visible(Run.objects, user).alias(k=key.expression)
        truth = list(runs.order_by(*(("-k", "-id") if key.descending else ("k", "id")))
                     .values_list("id", flat=True))
        at = truth.index(rng.choice(ids[len(ids) // 10:]))
        for params, expected in (({"sort": sort}, truth),
                                 ({"sort": sort, "after": truth[at]}, truth[at + 1:])):
            shown, _ = hist._history_pages(user, params, pages)
            if shown != expected[:len(shown)] or len(shown) < min(len(expected), 25 * pages):
                problems.append(f"{user.username} {params}: {len(shown)} shown, first "
                                f"{shown[:3]}; expected {expected[:3]}")
    return problems


def describe(size: dict) -> str:
    run_n, run_b = size["agents_app_run"]
    ev_n, ev_b = size["agents_app_event"]
    return (f"runs {run_n:,} ({run_b / 1e9:.2f} GB with indexes and TOAST), events {ev_n:,} "
            f"({ev_b / 1e9:.2f} GB), trigram indexes {size['run_task_trgm'] / 1e6:.0f} MB + "
            f"{size['run_answer_trgm'] / 1e6:.0f} MB, database {size['database'] / 1e9:.2f} GB")


def uptime() -> str:
    with open("/proc/loadavg") as f:
        return "load average " + ", ".join(f.read().split()[:3])


if __name__ == "__main__":
    main()
