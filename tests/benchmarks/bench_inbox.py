"""The inbox with 10,000 waiting gates and 1,000,000 runs in the history (issue 35).

A database migrated from scratch (a throwaway PostgreSQL cluster, tests/pg.py, with
``--database postgres``; a temporary SQLite file otherwise) is filled with bulk SQL
(``INSERT … SELECT`` over ``generate_series`` on PostgreSQL, a recursive CTE on SQLite):
1,200 people, 50 teams (one of 120 people, 49 of 18; an admin and four approvers each, the
rest members), 200 people in no team; ``--runs`` runs over two years, 60 % a team's and 40 %
personal, patterns and statuses mixed like real use (completed, failed, cancelled, budget
exceeded); ``--waiting`` of the newest runs (one in five of the latest 5 × waiting) wait at a
gate — plan approval (with its plan, a fifth of them replanned), merge request (with its
diff), triage, tool approval, a question — each with its open stop (``GateOpening``): 10 %
assigned to a person, 5 % to another team, 30 % with a deadline (some past, most in the next
three days), a tenth of the team ones under a rule needing two approvals (half with one
approval in). A third of the finished team runs have a closed stop in their past.

Server time in this process, ``--requests`` times per case: ``inbox.cards()`` and
``inbox.count()`` (the functions), the full ``GET /inbox/`` through Django's test client
(middleware, session, the navigation's count, the template), the navigation's count alone
(the context processor ``inbox_count``, on every page), and the statements per request.
People: an approver of the big team, a plain member of it with scope = all, a person with
only personal gates, and the approver with each filter (pattern, team, assigned to me,
deadline within 24 h). Target: p95 < 150 ms for the page.

    .venv/bin/python tests/benchmarks/bench_inbox.py --database postgres [--runs 1000000]
        [--waiting 10000] [--requests 100] [--explain]
    .venv/bin/python tests/benchmarks/bench_inbox.py   # SQLite, 200,000 runs, 10,000 waiting

``--explain`` prints EXPLAIN (ANALYZE on PostgreSQL, QUERY PLAN on SQLite) of every
statement of the approver's page slower than 5 ms.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.benchmarks.common import machine, pct, positive, settings_note  # noqa: E402

TEAMS = 50
BIG_TEAM = 120  # people in the first team; the others have SMALL_TEAM
SMALL_TEAM = 18
SOLO = 200  # people in no team
TARGET_MS = 150.0
# gate -> (status, pattern): a waiting run's gate and a pattern that stops there
GATES = [("plan_approval", "plan_execute", 4), ("merge_request", "plan_execute_review", 2),
         ("triage", "code_review", 2), ("tool_approval", "react", 1), ("ask_person", "react", 1)]
PATTERNS = [("plan_execute", 34), ("reflective", 12), ("debate", 9), ("team_lead", 12),
            ("rewoo", 10), ("react", 12), ("plan_execute_review", 4), ("code_review", 7)]
FINISHED = [("completed", 85), ("failed", 8), ("cancelled", 5), ("budget_exceeded", 2)]
TASKS = ["Collect the logs of the billing service, then find the error and propose a fix.",
         "Review the change to the invoice exporter and list the risks.",
         "Plan the migration of the nightly ETL job to the new queue, with a rollout plan.",
         "Compare three vector databases for the search ranking and recommend one.",
         "Draft the on-call rota for the next quarter and flag conflicts."]
DIFF = ("diff --git a/app/billing.py b/app/billing.py\n--- a/app/billing.py\n"
        "+++ b/app/billing.py\n@@ -1,3 +1,4 @@\n import os\n-RETRIES = 3\n+RETRIES = 5\n"
        "+TIMEOUT = 30\n def charge():\n")


STATE_DONE = json.dumps({"plan": {"steps": ["Collect the logs", "Parse them", "Find the cause"]},
                         "results": ["ok", "ok", "ok"], "answer": "Done: see the report."})
STATE_WAITING = json.dumps({
    "plan": {"goal": "Find the error", "steps": [f"Step {k}: {TASKS[k % len(TASKS)]}"
                                                 for k in range(8)]},
    "notes": [f"{k}: " + " ".join(TASKS[(k + j) % len(TASKS)] for j in range(3))
              for k in range(12)], "options": {"max_steps": 8}})


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--runs", type=positive(int, 1000, 10_000_000), default=None,
                   help="runs in all (default: 1,000,000 on PostgreSQL, 200,000 on SQLite)")
    p.add_argument("--waiting", type=positive(int, 10, 1_000_000), default=10_000)
    p.add_argument("--requests", type=positive(int, 1, 10_000), default=100)
    p.add_argument("--explain", action="store_true")
    p.add_argument("--explain-ms", type=positive(float, 0.0, 10_000.0), default=5.0,
                   help="explain the statements slower than this")
    p.add_argument("--profile", action="store_true",
                   help="also print a cProfile of the approver's page (20 requests)")
    p.error = lambda message: p.exit(2, f"bench_inbox: {message}\n")
    args = p.parse_args(argv)
    if args.runs is None:
        args.runs = 1_000_000 if args.database == "postgres" else 200_000
    if args.waiting * 5 > args.runs:
        p.error("--runs must be at least 5 × --waiting")
    return args


# --- SQL that both databases run ------------------------------------------------------------
class Sql:
    def __init__(self, vendor: str, base: str):
        self.pg = vendor == "postgresql"
        self.base = base  # the oldest run's time, 'YYYY-MM-DD HH:MM:SS' UTC

    def series(self, n: int) -> tuple[str, str]:
        """(prefix, FROM clause) of ``i`` = 1..n."""
        if self.pg:
            return "", f"generate_series(CAST(1 AS bigint), {int(n)}) AS g(i)"
        return (f"WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g "
                f"WHERE i < {int(n)}) "), "g"

    def ts(self, seconds: str, base: str | None = None) -> str:
        """The base time plus ``seconds`` (an SQL expression)."""
        base = base or f"'{self.base}'"
        if self.pg:
            return f"(CAST({base} AS timestamptz) + ({seconds}) * INTERVAL '1 second')"
        return f"strftime('%Y-%m-%d %H:%M:%f', {base}, '+' || CAST(({seconds}) AS TEXT) || ' seconds')"

    def now_plus(self, seconds: str) -> str:
        if self.pg:
            return f"(now() + ({seconds}) * INTERVAL '1 second')"
        return (f"strftime('%Y-%m-%d %H:%M:%f', 'now', CASE WHEN ({seconds}) >= 0 THEN '+' "
                f"ELSE '' END || CAST(({seconds}) AS TEXT) || ' seconds')")

    def json(self, text: str) -> str:
        quoted = "'" + text.replace("'", "''") + "'"
        return f"CAST({quoted} AS jsonb)" if self.pg else quoted

    @staticmethod
    def text(value: str) -> str:
        return "'" + value.replace("'", "''") + "'"


def mix(expr: str, choices: list[tuple[str, int]]) -> str:
    """CASE over ``expr`` (0..99) picking each choice by its weight (summing to 100)."""
    total, parts = 0, []
    for value, weight in choices:
        total += weight
        parts.append(f"WHEN {expr} < {total} THEN '{value}'")
    assert total == 100, choices
    return "CASE " + " ".join(parts[:-1]) + f" ELSE '{choices[-1][0]}' END"


def build(args, sql: Sql, cursor) -> dict:
    """Fill the database; returns the ids the cases need."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password

    from agents_app.gates.models import GateRule
    from agents_app.teams.models import Membership, Team

    User = get_user_model()
    t0 = time.monotonic()
    people = BIG_TEAM + (TEAMS - 1) * SMALL_TEAM
    password = make_password("bench-password-123")
    users = User.objects.bulk_create([User(username=f"p{i:04d}", password=password,
                                           email=f"p{i:04d}@example.org")
                                      for i in range(people + SOLO)], batch_size=2000)
    uid = list(User.objects.order_by("pk").values_list("pk", flat=True))
    assert uid == list(range(uid[0], uid[0] + len(uid))), "user ids are not contiguous"
    u0 = uid[0]
    teams = Team.objects.bulk_create([Team(name=f"Team {t:02d}") for t in range(TEAMS)])
    tid = list(Team.objects.order_by("pk").values_list("pk", flat=True))
    assert tid == list(range(tid[0], tid[0] + TEAMS))
    team0 = tid[0]

    def team_of(i: int) -> int:
        return 0 if i < BIG_TEAM else 1 + (i - BIG_TEAM) // SMALL_TEAM

    rows, first = [], {}
    for i in range(people):
        t = team_of(i)
        pos = i - first.setdefault(t, i)
        role = "admin" if pos == 0 else "approver" if pos <= 4 else "member"
        rows.append(Membership(team_id=tid[t], user_id=u0 + i, role=role))
    Membership.objects.bulk_create(rows, batch_size=2000)
    rules = GateRule.objects.bulk_create([GateRule(
        team_id=tid[t], name="Two approvals for plans", required_approvals=2,
        deadline_minutes=24 * 60, default_action="") for t in range(TEAMS)])
    rule0 = min(r.pk for r in rules)
    del users, teams

    n, w = args.runs, args.waiting
    span = 730 * 86400  # two years of history, the newest run now
    step = span / n
    # the person of run i: team runs by a team's person, personal ones by anyone
    person = f"((i * 7919) % {people})"
    person_any = f"((i * 7919) % {people + SOLO})"
    team_idx = (f"(CASE WHEN {person} < {BIG_TEAM} THEN 0 ELSE 1 + ({person} - {BIG_TEAM}) "
                f"/ {SMALL_TEAM} END)")
    is_team = "((i / 50) % 10 < 6)"  # independent of the gate ((i / 5) % 10)
    waiting = f"(i > {n - 5 * w} AND i % 5 = 0)"
    gate_pick = "((i / 5) % 10)"
    gate_choices = []
    acc = 0
    for gate, pattern, weight in GATES:
        gate_choices.append((gate, pattern, acc, acc + weight))
        acc += weight
    gate_case = "CASE " + " ".join(f"WHEN {gate_pick} < {hi} THEN '{g}'"
                                   for g, _, _, hi in gate_choices) + " END"
    gate_pattern = "CASE " + " ".join(f"WHEN {gate_pick} < {hi} THEN '{p}'"
                                      for _, p, _, hi in gate_choices) + " END"
    created = sql.ts(f"{span} - ({n} - i) * {step:.6f}", sql.now_base)
    finished = sql.ts(f"{span} - ({n} - i) * {step:.6f} + 30 + (i % 600)", sql.now_base)
    empty = sql.json("{}")
    tasks = "CASE " + " ".join(f"WHEN i % {len(TASKS)} = {k} THEN {sql.text(t)}"
                               for k, t in enumerate(TASKS)) + " END"
    cols = {
        "owner_id": f"{u0} + CASE WHEN {is_team} THEN {person} ELSE {person_any} END",
        "team_id": f"CASE WHEN {is_team} THEN {tid[0]} + {team_idx} ELSE NULL END",
        "pattern": f"CASE WHEN {waiting} THEN {gate_pattern} ELSE "
                   f"{mix('((i * 31) % 100)', PATTERNS)} END",
        "task": tasks + " || ' #' || CAST(i AS TEXT)",
        "status": f"CASE WHEN {waiting} THEN 'awaiting_' || {gate_case} ELSE "
                  f"{mix('((i * 37) % 100)', FINISHED)} END",
        "stage": "''",
        "gate": f"CASE WHEN {waiting} THEN {gate_case} ELSE '' END",
        # A pattern's state: ~4 KB at a gate (the plan, the notes so far), ~0.3 KB once done.
        "state": f"CASE WHEN {waiting} THEN {sql.json(STATE_WAITING)} ELSE "
                 f"{sql.json(STATE_DONE)} END",
        "options": empty,
        "models_used": sql.json('{"planner": "gpt-4o-mini", "executor": "gpt-4o-mini"}'),
        "offline": "FALSE", "max_cost_usd": "NULL", "max_tokens": "NULL",
        "cost_usd": "((i * 17) % 1000) / 1000.0",
        "prompt_tokens": "(i * 13) % 9000", "completion_tokens": "(i * 7) % 3000",
        "calls": "1 + i % 9", "stage_seq": "3 + i % 4", "stage_attempt": "0",
        "lease_owner": "''", "lease_expires_at": "NULL", "cancel_requested": "FALSE",
        "active_seconds": "(i % 600) * 1.0", "last_event_seq": "10 + i % 30",
        "answer": f"CASE WHEN {waiting} THEN '' ELSE 'Done: see the report.' END",
        "error": "''",
        "created_at": created,
        "updated_at": f"CASE WHEN {waiting} THEN {finished} ELSE {finished} END",
        "finished_at": f"CASE WHEN {waiting} THEN NULL ELSE {finished} END",
        "forked_from_id": "NULL", "fork_seq": "NULL", "root_id": "NULL", "fork": empty,
        "experiment_id": "NULL", "cell_id": "NULL", "item_id": "NULL", "repetition": "NULL",
    }
    prefix, source = sql.series(n)
    cursor.execute(f"{prefix}INSERT INTO agents_app_run ({', '.join(cols)}) SELECT "
                   f"{', '.join(cols.values())} FROM {source}")
    t_runs = time.monotonic() - t0
    # The open stops of the waiting runs.
    rel = "(r.id % 100)"
    team_rule = "(r.team_id IS NOT NULL AND (r.id / 5) % 20 < 3)"  # plan approvals
    ti = f"(r.team_id - {tid[0]})"  # a person of the run's team: its first one's id + k
    assignee_user = (f"CASE WHEN r.team_id IS NOT NULL AND {rel} < 10 THEN {u0} + CASE WHEN "
                     f"{ti} = 0 THEN 0 ELSE {BIG_TEAM} + ({ti} - 1) * {SMALL_TEAM} END "
                     f"+ r.id % {SMALL_TEAM} ELSE NULL END")
    assignee_team = (f"CASE WHEN r.team_id IS NOT NULL AND {rel} >= 10 AND {rel} < 15 THEN "
                     f"{tid[0]} + ((r.team_id - {tid[0]} + 1 + r.id % 7) % {TEAMS}) ELSE NULL END")
    deadline = (f"CASE WHEN {rel} >= 20 AND {rel} < 50 THEN "
                f"{sql.now_plus('(r.id % 96 - 12) * 3600')} ELSE NULL END")
    policy = sql.json('{"rule": "Two approvals for plans", "required": 2, '
                      '"exclude_initiator": false, "rejections": 1, "default_action": "", '
                      '"escalate_to": null, "escalate_to_name": ""}')
    cursor.execute(
        "INSERT INTO agents_app_gateopening (run_id, gate, opened_seq, seq, team_id, rule_id, "
        "policy, required, content_hash, assignee_user_id, assignee_team_id, opened_at, "
        "deadline_at, remind_at, escalate_at, reminded_at, escalated_at, defaulted_at, "
        "closed_at, outcome) "
        f"SELECT r.id, r.gate, r.stage_seq, r.stage_seq, r.team_id, CASE WHEN {team_rule} "
        f"THEN {rule0} + r.team_id - {tid[0]} ELSE NULL END, CASE WHEN {team_rule} THEN "
        f"{policy} ELSE {empty} END, CASE WHEN {team_rule} THEN 2 ELSE 1 END, "
        f"'h' || CAST(r.id AS TEXT), {assignee_user}, {assignee_team}, r.updated_at, "
        f"{deadline}, NULL, NULL, NULL, NULL, NULL, NULL, '' FROM agents_app_run r "
        "WHERE r.status LIKE 'awaiting%'")
    # A third of the finished team runs stopped at a gate once, decided long ago.
    cursor.execute(
        "INSERT INTO agents_app_gateopening (run_id, gate, opened_seq, seq, team_id, rule_id, "
        "policy, required, content_hash, assignee_user_id, assignee_team_id, opened_at, "
        "deadline_at, remind_at, escalate_at, reminded_at, escalated_at, defaulted_at, "
        "closed_at, outcome) "
        f"SELECT r.id, 'plan_approval', 1, 1, r.team_id, NULL, {empty}, 1, 'h', NULL, NULL, "
        "r.created_at, NULL, NULL, NULL, NULL, NULL, NULL, r.created_at, 'approved' "
        "FROM agents_app_run r WHERE r.team_id IS NOT NULL AND r.status NOT LIKE 'awaiting%' "
        "AND r.id % 3 = 0")
    # Half the two-approval gates have one approval in, by the team's admin.
    cursor.execute(
        "INSERT INTO agents_app_gatevote (opening_id, user_id, action, content_hash, channel, "
        "feedback, created_at, voided_at, void_reason) SELECT o.id, (SELECT m.user_id FROM "
        "agents_app_membership m WHERE m.team_id = o.team_id AND m.role = 'admin'), "
        "'approve', o.content_hash, 'inbox', '', o.opened_at, NULL, '' FROM "
        "agents_app_gateopening o WHERE o.closed_at IS NULL AND o.required = 2 AND o.id % 2 = 0")
    # Plans of the runs at plan approval (a fifth replanned: two versions), diffs of the
    # merge requests.
    steps1 = sql.json('["Collect the logs", "Parse them", "Group the errors", "Find the cause"]')
    steps2 = sql.json('["Collect the logs", "Parse them", "Check the disk", "Group the errors",'
                      ' "Find the cause"]')
    for version, steps, where in ((1, steps1, ""), (2, steps2, " AND r.id % 5 = 0")):
        cursor.execute(
            "INSERT INTO agents_app_planversion (run_id, version, steps, goal, reasoning, "
            "author, reason, frozen, details, created_at) SELECT r.id, "
            f"{version}, {steps}, 'Find the error', '', 'planner', '', 0, {empty}, "
            "r.created_at FROM agents_app_run r WHERE r.status = 'awaiting_plan_approval'"
            + where)
    cursor.execute(
        "INSERT INTO agents_app_agentreport (run_id, stage, kind, plan_version, round, trace, "
        "stopped, answer, commit_sha, base_sha, diff, diff_truncated, files, test_ran, "
        "test_output, test_exit, created_at) SELECT r.id, 'execute', 'executor', 1, 0, "
        f"{sql.json('[]')}, '', {empty}, 'abc', 'def', {sql.text(DIFF)}, FALSE, "
        f"{sql.json('[]')}, FALSE, '', NULL, r.created_at FROM agents_app_run r "
        "WHERE r.status = 'awaiting_merge_request'")
    t_all = time.monotonic() - t0
    if sql.pg:
        cursor.execute("VACUUM ANALYZE")
    else:
        cursor.execute("ANALYZE")
    # The people of the cases: the big team's first approver and a plain member of it; a
    # person in no team with the most waiting personal gates.
    approver = Membership.objects.filter(team_id=team0, role="approver").order_by("pk")[0]
    member = Membership.objects.filter(team_id=team0, role="member").order_by("pk")[0]
    cursor.execute(
        "SELECT owner_id, COUNT(*) FROM agents_app_run WHERE team_id IS NULL AND status LIKE "
        f"'awaiting%' AND owner_id >= {u0 + people} GROUP BY owner_id ORDER BY 2 DESC, 1 LIMIT 1")
    solo = cursor.fetchone()[0]
    return {"approver": approver.user_id, "member": member.user_id, "solo": solo,
            "team0": team0, "fill_runs_s": t_runs, "fill_s": t_all,
            "analyze_s": time.monotonic() - t0 - t_all}


def sizes(cursor) -> list[str]:
    out = []
    for table in ("auth_user", "agents_app_team", "agents_app_membership", "agents_app_run",
                  "agents_app_gateopening", "agents_app_gatevote", "agents_app_planversion",
                  "agents_app_agentreport"):
        cursor.execute(f"SELECT COUNT(*) FROM {table}")  # noqa: S608 - our table names
        out.append(f"{table.split('_', 2)[-1] if table.startswith('agents') else table} "
                   f"{cursor.fetchone()[0]:,}")
    cursor.execute("SELECT COUNT(*) FROM agents_app_run WHERE status LIKE 'awaiting%'")
    out.append(f"waiting {cursor.fetchone()[0]:,}")
    cursor.execute("SELECT COUNT(*) FROM agents_app_gateopening WHERE closed_at IS NULL")
    out.append(f"open stops {cursor.fetchone()[0]:,}")
    return out


def timed(fn, n: int) -> tuple[list[float], int]:
    """Milliseconds of each of ``n`` calls (after two to warm up), and statements per call."""
    from django.db import connection

    fn()
    statements = []
    with connection.execute_wrapper(lambda execute, sql, params, many, context: (
            statements.append(sql), execute(sql, params, many, context))[1]):
        fn()
    out, cpu = [], []
    for _ in range(n):
        t, c = time.perf_counter(), time.process_time()
        fn()
        out.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
    timed.cpu = cpu  # this process's CPU per call (the database's own is not in it)
    return out, len(statements)


def explain(fn, vendor: str, slower_than: float = 5.0) -> None:
    from django.db import connection

    seen = []

    def wrapper(execute, sql, params, many, context):
        t = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            seen.append(((time.perf_counter() - t) * 1000, sql, params))

    with connection.execute_wrapper(wrapper):
        fn()
    for ms, statement, params in seen:
        if ms < slower_than:
            continue
        print(f"\n-- {ms:.1f} ms: {statement[:3000]} -- {str(params)[:300]}")
        with connection.cursor() as c:
            c.execute(("EXPLAIN (ANALYZE, BUFFERS) " if vendor == "postgresql"
                       else "EXPLAIN QUERY PLAN ") + statement, params)
            for row in c.fetchall():
                print("   ", " | ".join(str(x) for x in row))


def main(argv=None) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="quorum-bench-inbox-") as tmp, \
            contextlib.ExitStack() as cleanup:
        var = Path(tmp)
        env = {}
        if args.database == "postgres":
            from tests import pg

            if pg.missing():
                sys.exit(f"bench_inbox: {pg.missing()}")
            cluster = cleanup.enter_context(pg.PgCluster(fsync=False))
            env["DATABASE_URL"] = cluster.url
        from tests.benchmarks.common import setup_django
        from tests.stack import free_port

        setup_django(var, free_port(), ALLOWED_HOSTS="127.0.0.1,localhost,testserver", **env)
        run_cases(args)


def run_cases(args) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client, RequestFactory

    from agents_app import inbox
    from agents_app.inbox_views import inbox_count

    vendor = connection.vendor
    import datetime as dt

    now = dt.datetime.now(dt.UTC)
    sql = Sql(vendor, "")
    sql.now_base = sql.text((now - dt.timedelta(days=730)).strftime("%Y-%m-%d %H:%M:%S+00:00"
                                                                   if vendor == "postgresql"
                                                                   else "%Y-%m-%d %H:%M:%S"))
    with connection.cursor() as cursor:
        ids = build(args, sql, cursor)
        counts = sizes(cursor)
    db_size = ""
    if vendor == "postgresql":
        with connection.cursor() as c:
            c.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
            db_size = c.fetchone()[0]
    else:
        db_size = f"{Path(connection.settings_dict['NAME']).stat().st_size / 1e6:.0f} MB"
    User = get_user_model()
    people = {key: User.objects.get(pk=ids[key]) for key in ("approver", "member", "solo")}
    clients = {}
    for key, user in people.items():
        c = Client()
        c.force_login(user)
        clients[key] = c
    team0 = ids["team0"]
    cases = [
        ("approver of the big team (scope = decide)", "approver", {}),
        ("plain member of the big team, scope = all", "member", {"scope": "all"}),
        ("a person with only personal gates", "solo", {}),
        ("approver, scope = all", "approver", {"scope": "all"}),
        ("approver, pattern = plan_execute", "approver", {"pattern": "plan_execute"}),
        ("approver, team = the big team", "approver", {"team": str(team0)}),
        ("approver, assignee = me", "approver", {"assignee": "me"}),
        ("approver, deadline within 24 h", "approver", {"due_within": "24"}),
        ("member, scope = all, gate = merge_request", "member",
         {"scope": "all", "gate": "merge_request"}),
        ("approver, the list reloading itself (htmx, every 20 s)", "approver", {"part": "list"}),
    ]
    factory = RequestFactory()
    rows = []
    for label, who, params in cases:
        user = people[who]
        filters = inbox.Filters.read(params)
        shown = len(inbox.cards(user, filters))
        fn_ms, fn_q = timed(lambda u=user, f=filters: (inbox.cards(u, f), inbox.count(u)),
                            args.requests)
        client = clients[who]

        def page(c=client, p=params):
            response = c.get("/inbox/", p, **({"HTTP_HX_REQUEST": "true"} if "part" in p
                                               else {}))
            assert response.status_code == 200, response.status_code

        page_ms, page_q = timed(page, args.requests)
        rows.append((label, shown, fn_ms, fn_q, page_ms, page_q, timed.cpu))
        print(f"# {label}: {shown} cards, page p95 {pct(page_ms, 95):.1f} ms", flush=True)
    nav = []
    for who in ("approver", "member", "solo"):
        request = factory.get("/")
        request.user = people[who]
        request.htmx = False
        ms, q = timed(lambda r=request: inbox_count(r), args.requests)
        nav.append((who, inbox.count(people[who]), ms, q))
    if args.profile:
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.enable()
        for _ in range(20):
            clients["approver"].get("/inbox/")
        profile.disable()
        print("\n# cProfile of 20 requests of the approver's page (cumulative):")
        if os.environ.get("BENCH_CALLERS"):
            pstats.Stats(profile, stream=sys.stdout).print_callers(os.environ["BENCH_CALLERS"])
        pstats.Stats(profile, stream=sys.stdout).sort_stats(os.environ.get("BENCH_SORT", "cumulative")).print_stats(int(os.environ.get("BENCH_LINES", "45")))
    if args.explain:
        print("\n# EXPLAIN of the approver's page and the member's (scope = all):")
        for who, params in (("approver", {}), ("member", {"scope": "all"}), ("solo", {})):
            explain(lambda c=clients[who], p=params: c.get("/inbox/", p), vendor,
                    args.explain_ms)

    name = "PostgreSQL" if vendor == "postgresql" else "SQLite"
    with connection.cursor() as c:
        c.execute("SELECT version()" if vendor == "postgresql" else "SELECT sqlite_version()")
        version = c.fetchone()[0].split(" on ")[0]
    print()
    print(f"# Inbox benchmark — {machine()}, {name} ({version}), {settings_note()}")
    print(f"# {args.runs:,} runs, {args.waiting:,} waiting; rows: {', '.join(counts)}; "
          f"database {db_size}; filled in {ids['fill_s']:.0f} s (runs {ids['fill_runs_s']:.0f} s)"
          f", analyzed in {ids['analyze_s']:.0f} s")
    print(f"# server time in process, {args.requests} requests per case; target: page p95 < "
          f"{TARGET_MS:.0f} ms")
    print()
    print("| case | cards | cards()+count() p50 | p95 | statements | GET /inbox/ p50 | p95 | "
          "statements | page: CPU here p50 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = 0.0
    for label, shown, fn_ms, fn_q, page_ms, page_q, cpu in rows:
        worst = max(worst, pct(page_ms, 95))
        print(f"| {label} | {shown} | {pct(fn_ms, 50):.1f} ms | {pct(fn_ms, 95):.1f} ms | "
              f"{fn_q} | {pct(page_ms, 50):.1f} ms | {pct(page_ms, 95):.1f} ms | {page_q} | "
              f"{pct(cpu, 50):.1f} ms |")
    print()
    print("| navigation count (context processor) | count | p50 | p95 | statements |")
    print("|---|---:|---:|---:|---:|")
    for who, n, ms, q in nav:
        print(f"| {who} | {n} | {pct(ms, 50):.1f} ms | {pct(ms, 95):.1f} ms | {q} |")
    print()
    verdict = "met" if worst < TARGET_MS else "MISSED"
    print(f"# worst page p95 {worst:.1f} ms: target {verdict}")


if __name__ == "__main__":
    main()
