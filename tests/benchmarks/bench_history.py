"""History and dashboard with 100,000 runs: server time per request, then steady load over
HTTP on loopback.

A temporary SQLite database is migrated from scratch and filled (``bulk_create`` in
batches) with ``--runs`` runs for one user and ``--other`` runs for another, interleaved:
a realistic mix of patterns, statuses (mostly finished, some failed, some waiting at a
gate), tasks, answers and pattern state of a few kilobytes, merge requests for the change
runs, review rows for the code reviews, and two model calls per run (short prompts).

Cases: the history's pages, filters (statuses and status groups, pattern, dates, model,
cost), sorts (cost, tokens, duration; first and later pages) and searches (words and a quoted
phrase), and the usage page over 30 days, a year and two years. Searches and sorted pages are
checked against a plain query over every run, and the usage sums against plain sums.

(a) Server time: each case is requested ``--requests`` times in this process through
    Django's test client (the whole middleware stack, the session and the template), and
    the p50 / p95 of the wall time per request are printed. Target (issue 6): history
    p95 <= 150 ms.
(b) Steady load: Daphne serves the same database on loopback; ``--clients`` asyncio clients
    (aiohttp, signed in with a session cookie) request as fast as they can for
    ``--duration`` seconds each scenario. Requests/s, latency p50 / p95 / p99 and errors.

    .venv/bin/python tests/benchmarks/bench_history.py [--runs 100000] [--requests 200]
        [--clients 8] [--duration 15]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import random
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.benchmarks import common  # noqa: E402
from tests.benchmarks.common import pct  # noqa: E402

SEARCH_COMMON = "postgres"     # in about 5% of tasks: the first page fills quickly
SEARCH_RARE = "zetaquartz"     # in about 0.05% of tasks: most of the rows are read
SEARCH_ABSENT = "nosuchthing"  # in no row: every run of the user is read
SEARCH_PHRASE = "restore the schema"  # common words: as words they fill a page at once
SEARCH_PHRASE_QUOTED = f'"{SEARCH_PHRASE}"'  # one phrase, rarely in this order: many candidates
SEARCH_WORDS = f"{SEARCH_RARE} storage"  # a rare word and a common one: the rare one decides
SEARCH_SHORT = "zq"            # two letters, in no row: shorter than a trigram, no index

PATTERN_MIX = [("plan_execute", 34), ("reflective", 12), ("debate", 9), ("team_lead", 12),
               ("rewoo", 10), ("react", 12), ("plan_execute_review", 4), ("code_review", 7)]
STATUS_MIX = [("completed", 780), ("failed", 80), ("cancelled", 40), ("budget_exceeded", 20),
              ("awaiting_plan_approval", 15), ("awaiting_tool_approval", 10),
              ("awaiting_ask_person", 5), ("awaiting_merge_request", 10),
              ("awaiting_triage", 20), ("executing", 5), ("queued", 5)]
ROLES = {"plan_execute": ("planner", "executor", "synthesizer"), "reflective": ("actor", "critic"),
         "debate": ("debater", "judge"), "team_lead": ("lead", "member"),
         "rewoo": ("planner", "organizer"), "react": ("agent",),
         "plan_execute_review": ("planner", "executor", "reviewer"),
         "code_review": ("security", "architecture", "style", "synthesizer")}
MODELS = ["gpt-4o-mini", "gpt-4o", "anthropic/claude-3-5-haiku-latest", "offline/default",
          "gemini/gemini-2.0-flash"]

VERBS = ["Compare", "Summarise", "Review", "Plan", "Investigate", "Draft", "Explain", "Audit",
         "Design", "Estimate", "Refactor", "Document", "Benchmark", "Migrate", "Debug"]
SUBJECTS = ["the billing service", "our onboarding flow", "the search ranking", "three vector "
            "databases", "the CI pipeline", "the mobile release", "the data retention policy",
            "the on-call rota", "the GraphQL gateway", "the invoice exporter", "the cache layer",
            "the login throttling", "the nightly ETL job", "the pricing page", "the SDK docs"]
TAILS = ["then recommend one", "and list the risks", "then write a short report",
         "with a rollout plan", "and estimate the cost", "for the quarterly review",
         "and propose three alternatives", "before Friday's meeting", "for a new engineer",
         "and flag anything that needs a person's decision"]
WORDS = ("latency throughput budget rollout migration schema index cache queue worker retry "
         "timeout incident postmortem customer invoice ledger tenant region replica shard "
         "backup restore deploy canary feature flag metric dashboard alert threshold owner "
         "review approval risk mitigation estimate quarter roadmap contract vendor license "
         "python django celery redis kafka terraform kubernetes docker nginx grafana sentry "
         "we should consider the tradeoffs carefully because the current design works but "
         "it does not scale past the next order of magnitude without changes to storage").split()


def setup_django(var_dir: Path, redis_port: int) -> None:
    common.setup_django(var_dir, redis_port, ALLOWED_HOSTS="127.0.0.1,localhost,testserver")


# --- data ------------------------------------------------------------------------------------
def _weighted(rng: random.Random, mix):
    names, weights = zip(*mix, strict=True)
    return rng.choices(names, weights=weights)[0]


class TextPool:
    """Paragraphs made once and reused, so 100,000 rows take seconds to build, not minutes."""

    def __init__(self, rng: random.Random, n: int = 3000):
        self.rng = rng
        self.paragraphs = [" ".join(rng.choices(WORDS, k=rng.randint(40, 110))).capitalize() + "."
                           for _ in range(n)]

    def text(self, chars: int) -> str:
        out, size = [], 0
        while size < chars:
            p = self.rng.choice(self.paragraphs)
            out.append(p)
            size += len(p) + 2
        return "\n\n".join(out)


def make_task(rng: random.Random, i: int) -> str:
    task = f"{rng.choice(VERBS)} {rng.choice(SUBJECTS)}, {rng.choice(TAILS)}."
    if rng.random() < 0.05:
        task += f" Consider {SEARCH_COMMON} for the storage."
    if rng.random() < 0.0005:
        task += f" Code name {SEARCH_RARE}."
    if rng.random() < 0.6:  # many tasks carry some context
        task += " " + " ".join(rng.choices(WORDS, k=rng.randint(5, 60)))
    return f"{task} (ticket {i})"


def seed(owner, other, n_owner: int, n_other: int, batch: int = 2000) -> dict:
    """Fill the database; returns what the cases need (the owner's ids, newest first)."""
    from django.db import transaction

    from agents_app.models import MergeRequest, ModelCall, Run
    from reviews_app.models import Review

    rng = random.Random(6)  # noqa: S311 - benchmark data
    pool = TextPool(rng)
    total = n_owner + n_other
    other_every = max(1, total // max(1, n_other)) if n_other else 0
    now = dt.datetime.now(dt.UTC)
    start = now - dt.timedelta(days=730)
    step = (now - start) / total
    created_field = Run._meta.get_field("created_at")
    review_created = Review._meta.get_field("created_at")
    created_field.auto_now_add = review_created.auto_now_add = False  # keep our timestamps
    made_owner = made_other = 0
    try:
        i = 0
        while made_owner < n_owner or made_other < n_other:
            rows = []
            for _ in range(batch):
                if made_owner >= n_owner and made_other >= n_other:
                    break
                use_other = made_other < n_other and (
                    made_owner >= n_owner or (other_every and i % other_every == other_every - 1))
                user = other if use_other else owner
                made_other += use_other
                made_owner += not use_other
                pattern = _weighted(rng, PATTERN_MIX)
                status = _weighted(rng, STATUS_MIX)
                created = start + step * i
                model = rng.choice(MODELS)
                finished = status in ("completed", "failed", "cancelled", "budget_exceeded")
                prompt, completion = rng.randint(800, 40000), rng.randint(200, 8000)
                rows.append(Run(
                    owner=user, pattern=pattern, task=make_task(rng, i), status=status,
                    stage="" if finished else "round:1",
                    gate=status[len("awaiting_"):] if status.startswith("awaiting_") else "",
                    state={"task": "…", "options": {"max_rounds": 3},
                           "notes": pool.text(rng.randint(1500, 6000))},
                    options={"max_rounds": 3, "auto_approve": rng.random() < 0.3},
                    models_used={r: model for r in ROLES[pattern]}, offline=model.startswith("offline"),
                    max_cost_usd=Decimal("1.0"), max_tokens=200_000,
                    cost_usd=Decimal(rng.randint(0, 90000)) / Decimal(100000),
                    prompt_tokens=prompt, completion_tokens=completion, calls=rng.randint(1, 25),
                    stage_seq=rng.randint(1, 20), last_event_seq=rng.randint(5, 60),
                    answer=pool.text(rng.randint(200, 3000)) if status == "completed" else "",
                    error="The model call failed after 3 attempts: 503" if status == "failed" else "",
                    created_at=created,
                    finished_at=created + dt.timedelta(seconds=rng.randint(5, 900)) if finished else None,
                ))
                i += 1
            with transaction.atomic():
                made = Run.objects.bulk_create(rows)
                MergeRequest.objects.bulk_create([
                    MergeRequest(run=r, repo="/srv/repos/app", base_branch="main",
                                 branch=f"quorum/run-{r.pk}",
                                 status=rng.choice(["open", "merged", "discarded", "draft"]))
                    for r in made if r.pattern == "plan_execute_review"])
                Review.objects.bulk_create([
                    Review(run=r, owner_id=r.owner_id, source_kind="paste", source_label="pasted diff",
                           diff_text="diff --git a/x.py b/x.py\n", total_files=1, created_at=r.created_at)
                    for r in made if r.pattern == "code_review"])
                ModelCall.objects.bulk_create(_calls(rng, pool, made))
    finally:
        created_field.auto_now_add = review_created.auto_now_add = True
    ids = list(Run.objects.filter(owner=owner).order_by("-id").values_list("id", flat=True))
    return {"ids": ids}


def _calls(rng: random.Random, pool: TextPool, runs) -> list:
    """Two model calls per run (its first role's model), splitting the run's tokens and cost, so
    the usage page's sums by model equal its sums by run. Their prompts and replies are short
    (about 1 KB together): the usage page reads calls from an index, not from their rows."""
    from agents_app.models import ModelCall

    out = []
    for r in runs:
        role, model = next(iter(r.models_used.items()))
        half_cost = (r.cost_usd / 2).quantize(Decimal("0.000001"))
        for k, (prompt, completion, cost) in enumerate((
                (r.prompt_tokens // 2, r.completion_tokens // 2, half_cost),
                (r.prompt_tokens - r.prompt_tokens // 2, r.completion_tokens - r.completion_tokens // 2,
                 r.cost_usd - half_cost))):
            out.append(ModelCall(run=r, stage=f"s:{k}", key=role, role=role, model=model,
                                 messages=[{"role": "user", "content": pool.text(400)[:600]}],
                                 response=pool.text(300)[:400], prompt_tokens=prompt,
                                 completion_tokens=completion, cost_usd=cost,
                                 latency_ms=rng.randint(300, 9000)))
    return out


# --- cases -----------------------------------------------------------------------------------
def cases(ids: list[int]) -> list[tuple[str, callable, bool]]:
    """(name, params(rng) -> query dict, htmx partial?). Later pages use a random cursor in the
    oldest 90% of the owner's runs, so no two requests read the same rows."""
    deep = ids[len(ids) // 10:]
    now = dt.date.today()
    year_ago = now - dt.timedelta(days=365)
    return [
        ("dashboard (full page, first history page)", lambda r: {}, False),
        ("history: first page (htmx partial)", lambda r: {}, True),
        ("history: a later page (keyset cursor)", lambda r: {"before": r.choice(deep)}, True),
        ("history: status = failed", lambda r: {"status": "failed"}, True),
        ("history: status = failed, later page",
         lambda r: {"status": "failed", "before": r.choice(deep)}, True),
        ("history: status = awaiting plan approval (rare)",
         lambda r: {"status": "awaiting_plan_approval"}, True),
        ("history: pattern = debate", lambda r: {"pattern": "debate"}, True),
        ("history: pattern = react and status = cancelled",
         lambda r: {"pattern": "react", "status": "cancelled"}, True),
        ("history: status group = waiting for me (6.5%)", lambda r: {"status": "all_waiting"}, True),
        ("history: status group = running (1%)", lambda r: {"status": "all_running"}, True),
        ("history: status group = failed, later page",
         lambda r: {"status": "all_failed", "before": r.choice(deep)}, True),
        ("history: from = 30 days ago", lambda r: {"from": str(now - dt.timedelta(days=30))}, True),
        ("history: from .. to = a month a year ago",
         lambda r: {"from": str(year_ago), "to": str(year_ago + dt.timedelta(days=30))}, True),
        (f"history: model = {MODELS[4]} (20%)", lambda r: {"model": MODELS[4]}, True),
        ("history: model = one no run used", lambda r: {"model": "no/such-model"}, True),
        ("history: min cost = 0.85 (5%)", lambda r: {"min_cost": "0.85"}, True),
        ("history: sort = cost, highest first", lambda r: {"sort": "-cost"}, True),
        ("history: sort = cost, a later page",
         lambda r: {"sort": "-cost", "after": r.choice(deep)}, True),
        ("history: sort = tokens, fewest first, a later page",
         lambda r: {"sort": "tokens", "after": r.choice(deep)}, True),
        ("history: sort = duration, longest first", lambda r: {"sort": "-duration"}, True),
        ("history: sort = duration, shortest first, a later page",
         lambda r: {"sort": "duration", "after": r.choice(deep)}, True),
        ("history: sort = cost and status = failed",
         lambda r: {"sort": "-cost", "status": "failed"}, True),
        ("history: sort = tokens and pattern = debate, a later page",
         lambda r: {"sort": "-tokens", "pattern": "debate", "after": r.choice(deep)}, True),
        (f"history: q = {SEARCH_COMMON} (5% of runs)", lambda r: {"q": SEARCH_COMMON}, True),
        (f"history: q = {SEARCH_RARE} (0.05% of runs)", lambda r: {"q": SEARCH_RARE}, True),
        (f"history: q = {SEARCH_ABSENT} (no match)", lambda r: {"q": SEARCH_ABSENT}, True),
        (f"history: q = {SEARCH_PHRASE_QUOTED} (a quoted phrase of common words, 0.3% of runs)",
         lambda r: {"q": SEARCH_PHRASE_QUOTED}, True),
        (f"history: q = {SEARCH_PHRASE} (three common words)", lambda r: {"q": SEARCH_PHRASE}, True),
        (f"history: q = {SEARCH_WORDS} (two words, rare together)",
         lambda r: {"q": SEARCH_WORDS}, True),
        (f"history: q = {SEARCH_SHORT} (two letters, no match)", lambda r: {"q": SEARCH_SHORT}, True),
        ("history: status = failed and q = we should",
         lambda r: {"status": "failed", "q": "we should"}, True),
    ]


def verify_usage(owner) -> list[str]:
    """The usage page's sums over two years against plain sums of the runs and of the calls."""
    from django.db.models import Count, Sum

    from agents_app.models import ModelCall, Run
    from agents_app.usage import usage

    today = dt.date.today()
    tables = usage(owner, today - dt.timedelta(days=800), today, "month")
    runs = Run.objects.filter(owner=owner).aggregate(n=Count("id"), cost=Sum("cost_usd"))
    calls = ModelCall.objects.filter(run__owner=owner).aggregate(cost=Sum("cost_usd"))
    problems = []
    if tables["totals"]["runs"] != runs["n"]:
        problems.append(f"runs {tables['totals']['runs']} != {runs['n']}")
    if abs(tables["totals"]["cost"] - runs["cost"]) > Decimal("0.001"):
        problems.append(f"cost {tables['totals']['cost']} != {runs['cost']}")
    by_model = sum((m["cost"] for m in tables["by_model"]), Decimal(0))
    if abs(by_model - calls["cost"]) > Decimal("0.001"):
        problems.append(f"cost by model {by_model} != {calls['cost']}")
    return problems


def usage_cases() -> list[tuple[str, str, callable]]:
    """(name, path, params(rng)): the usage page and its CSV, over short and long ranges."""
    today = dt.date.today()
    return [
        ("usage: the last 30 days, by day (full page)", "/usage/", lambda r: {}),
        ("usage: a year, by week", "/usage/",
         lambda r: {"from": str(today - dt.timedelta(days=364)), "to": str(today), "by": "week"}),
        ("usage: two years (every run), by month", "/usage/",
         lambda r: {"from": str(today - dt.timedelta(days=731)), "to": str(today), "by": "month"}),
        ("usage: CSV by model, a year", "/usage/export.csv",
         lambda r: {"table": "models", "from": str(today - dt.timedelta(days=364)),
                    "to": str(today)}),
    ]


PAUSED = "searches further back"  # the history's note when a search stopped early


def plain_search_times(owner, terms, n: int = 10) -> list[tuple[str, float]]:
    """The design before the trigram index and the time budget, for comparison in the same
    run: one page of a plain ``icontains`` on task or answer (the query alone, no template)."""
    from django.db.models import Q

    from agents_app.models import Run

    rows = []
    for term in terms:
        qs = (Run.objects.filter(owner=owner).filter(Q(task__icontains=term) | Q(answer__icontains=term))
              .select_related("merge_request").order_by("-id"))
        times = []
        for _ in range(n):
            t = time.perf_counter()
            list(qs[:26])
            times.append(time.perf_counter() - t)
        rows.append((term, 1000 * pct(times, 50)))
    return rows


def _history_pages(owner, params: dict, max_pages: int) -> tuple[list[int], bool]:
    """The ids the history shows for ``params``, following its own "Older"/"Next" links for
    at most ``max_pages`` pages; and whether it reached the last page."""
    from django.test import RequestFactory

    from agents_app.history import history

    factory = RequestFactory()
    shown, cursor = [], {}
    for _ in range(max_pages):
        request = factory.get("/", {**params, **cursor})
        request.user = owner
        ctx = history(request)
        assert not ctx["filter_problems"], ctx["filter_problems"]
        shown += [r.pk for r in ctx["runs"]]
        cursor = ctx["next_cursor"]
        if not cursor:
            return shown, True
    return shown, False


def verify_search(owner, terms, max_pages: int = 8) -> list[str]:
    """Walk the search's pages (following "Older") and compare them with a plain icontains of
    every word over every run: the same runs, in the same order, none twice. Returns the
    problems found."""
    from functools import reduce
    from operator import and_

    from django.db.models import Q

    from agents_app.models import Run
    from agents_app.search import search_terms

    problems = []
    for params in terms:
        shown, done = _history_pages(owner, params, max_pages)
        runs = Run.objects.filter(owner=owner)
        if params.get("status"):
            runs = runs.filter(status=params["status"])
        words = reduce(and_, (Q(task__icontains=t) | Q(answer__icontains=t)
                              for t in search_terms(params["q"])))
        truth = list(runs.filter(words).order_by("-id").values_list("id", flat=True))
        if shown != (truth if done else truth[:len(shown)]):
            problems.append(f"{params}: {len(shown)} shown, first {shown[:3]}; expected {truth[:3]}")
    return problems


def verify_sorts(owner, ids: list[int], pages: int = 4) -> list[str]:
    """Walk a few pages of each sort, from the top and from a run deep in the order, and
    compare them with the whole order computed in one query (by the key, then the id)."""
    from agents_app.history import sort_key
    from agents_app.models import Run

    rng = random.Random(3)  # noqa: S311
    problems = []
    for sort in ("-cost", "cost", "-tokens", "tokens", "-duration", "duration", "started"):
        key = sort_key(sort)
        runs = Run.objects.filter(owner=owner)
        if key.expression is not None:
            runs = runs.alias(k=key.expression)
            order = ("-k", "-id") if key.descending else ("k", "id")
        else:
            order = ("-id",) if key.descending else ("id",)
        truth = list(runs.order_by(*order).values_list("id", flat=True))
        at = truth.index(rng.choice(ids[len(ids) // 10:]))
        for params, expected in (({"sort": sort}, truth),
                                 ({"sort": sort, "after": truth[at]}, truth[at + 1:])):
            shown, _ = _history_pages(owner, params, pages)
            if shown != expected[:len(shown)] or len(shown) < min(len(expected), 25 * pages):
                problems.append(f"{params}: {len(shown)} shown, first {shown[:3]}; "
                                f"expected {expected[:3]}")
    return problems


HTMX = {"HX-Request": "true", "HX-Target": "history"}


def server_times(owner, ids: list[int], n: int, budget_s: float) -> list[tuple]:
    from django.test import Client

    client = Client()
    client.force_login(owner)
    rng = random.Random(1)  # noqa: S311
    rows = []
    for name, params, htmx in cases(ids):
        headers = HTMX if htmx else {}
        client.get("/", params(rng), headers=headers)  # warm-up
        times, paused = [], 0
        t_case = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            resp = client.get("/", params(rng), headers=headers)
            times.append(time.perf_counter() - t)
            if resp.status_code != 200:
                raise RuntimeError(f"{name}: HTTP {resp.status_code}")
            if time.perf_counter() - t_case > budget_s:
                break
            paused += PAUSED in resp.content.decode()
        rows.append((name, len(times), 1000 * pct(times, 50), 1000 * pct(times, 95), paused))
    for name, path, params in usage_cases():
        client.get(path, params(rng))  # warm-up
        times = []
        t_case = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            resp = client.get(path, params(rng))
            times.append(time.perf_counter() - t)
            if resp.status_code != 200:
                raise RuntimeError(f"{name}: HTTP {resp.status_code}")
            if time.perf_counter() - t_case > budget_s:
                break
        rows.append((name, len(times), 1000 * pct(times, 50), 1000 * pct(times, 95), 0))
    return rows


# --- load over HTTP ------------------------------------------------------------------------
async def load(base: str, cookie: str, scenario, clients: int, duration: float) -> dict:
    import aiohttp

    rng = random.Random(2)  # noqa: S311
    results: list[tuple[str, float, bool]] = []
    errors: list[str] = []
    stop_at = time.monotonic() + duration

    async def one(session, k: int):
        i = k
        while time.monotonic() < stop_at:
            name, params, htmx = scenario[i % len(scenario)]
            i += 1
            headers = {"Cookie": cookie, **(HTMX if htmx else {})}
            t = time.perf_counter()
            try:
                async with session.get(base + "/", params={key: str(v) for key, v in params(rng).items()},
                                       headers=headers, allow_redirects=False) as resp:
                    body = await resp.read()
                    ok = resp.status == 200 and b'id="history"' in body
                    if not ok:
                        errors.append(f"{name}: HTTP {resp.status}")
            except (TimeoutError, aiohttp.ClientError) as exc:
                ok = False
                errors.append(f"{name}: {exc!r}")
            results.append((name, time.perf_counter() - t, ok))

    timeout = aiohttp.ClientTimeout(total=60)
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        t0 = time.perf_counter()
        await asyncio.gather(*(one(session, k) for k in range(clients)))
        wall = time.perf_counter() - t0
    lat = [r[1] for r in results]
    return {"n": len(results), "rps": len(results) / wall, "p50": 1000 * pct(lat, 50),
            "p95": 1000 * pct(lat, 95), "p99": 1000 * pct(lat, 99),
            "errors": len(errors), "error_samples": errors[:5]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000, help="runs of the measured user")
    parser.add_argument("--other", type=int, default=3_000, help="runs of another user")
    parser.add_argument("--requests", type=int, default=200, help="requests per case, in process")
    parser.add_argument("--case-budget", type=float, default=60.0,
                        help="stop a case's in-process requests after this many seconds")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8],
                        help="concurrent HTTP clients (one load run per value and scenario)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per load run")
    parser.add_argument("--keep", action="store_true", help="print the temp dir and keep it")
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="quorum-bench-history-")
    var = Path(tmp)
    web = None
    try:
        from tests.stack import free_port

        setup_django(var, free_port())
        from django.contrib.auth import get_user_model
        from django.db import connection
        from django.test import Client

        User = get_user_model()
        owner = User.objects.create_user("alice")
        other = User.objects.create_user("bob")
        t = time.perf_counter()
        data = seed(owner, other, args.runs, args.other)
        seed_s = time.perf_counter() - t
        with connection.cursor() as cur:
            cur.execute("ANALYZE")
            try:
                cur.execute("SELECT sum(length(block)) FROM agents_app_run_search_data")
                index_mb = (cur.fetchone()[0] or 0) / 1e6
            except Exception:  # no trigram index (SQLite without FTS5 trigram)
                index_mb = 0.0
        db_mb = (var / "bench.sqlite3").stat().st_size / 1e6
        print(f"# seeded {args.runs:,} + {args.other:,} runs in {seed_s:.0f} s; database "
              f"{db_mb:.0f} MB, of which the search index {index_mb:.0f} MB", flush=True)

        server = server_times(owner, data["ids"], args.requests, args.case_budget)
        print("# server time done", flush=True)
        problems = verify_search(owner, [
            {"q": q} for q in (SEARCH_COMMON, SEARCH_RARE, SEARCH_ABSENT, SEARCH_PHRASE,
                               SEARCH_PHRASE_QUOTED, SEARCH_WORDS, SEARCH_SHORT, "WE SHOULD",
                               '"ticket 1999)"')] + [
            {"q": q, "status": st} for q in (SEARCH_COMMON, SEARCH_RARE, "we should")
            for st in ("failed", "awaiting_plan_approval")])
        print(f"# search pages checked against a plain icontains of every word: "
              f"{'all equal' if not problems else problems}", flush=True)
        sort_problems = verify_sorts(owner, data["ids"])
        print(f"# sorted pages checked against the whole order: "
              f"{'all equal' if not sort_problems else sort_problems}", flush=True)
        problems += sort_problems
        usage_problems = verify_usage(owner)
        print(f"# usage sums checked against plain sums: "
              f"{'all equal' if not usage_problems else usage_problems}", flush=True)
        problems += usage_problems
        plain = plain_search_times(owner, [SEARCH_RARE, SEARCH_ABSENT, SEARCH_PHRASE, SEARCH_SHORT])

        from tests.stack import start_web

        port = free_port()
        web = start_web(var, port, QUORUM_LOG_LEVEL="WARNING", **common.child_env())
        base = f"http://127.0.0.1:{port}"
        client = Client()
        client.force_login(owner)
        cookie = f"sessionid={client.cookies['sessionid'].value}"
        all_cases = cases(data["ids"])
        scenarios = [("dashboard (full page)", all_cases[:1]),
                     ("history mix (every history case in turn)", all_cases[1:]),
                     ("history mix without the text searches",
                      [c for c in all_cases[1:] if "q =" not in c[0]])]
        asyncio.run(load(base, cookie, all_cases[:2], 2, 2.0))  # warm-up: imports, caches
        loads = [(name, n, asyncio.run(load(base, cookie, sc, n, args.duration)))
                 for name, sc in scenarios for n in args.clients]
    finally:
        if web is not None:
            web.stop()
        if args.keep:
            print(f"# kept {tmp}")
        else:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)

    import django

    print()
    print(f"History benchmark — {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, Django "
          f"{django.get_version()}, SQLite {__import__('sqlite3').sqlite_version}; "
          f"{args.runs:,} runs of the user (+{args.other:,} of another), database {db_mb:.0f} MB "
          f"(trigram search index {index_mb:.0f} MB)")
    print()
    print("Server time in process (Django test client: middleware, session, query, template):")
    print()
    print("| request | n | p50 | p95 | target p95 ≤ 150 ms | search paused |")
    print("|---|---:|---:|---:|---|---:|")
    for name, n, p50, p95, paused in server:
        print(f"| {name} | {n} | {p50:.1f} ms | {p95:.1f} ms | "
              f"{'met' if p95 <= 150 else '**missed**'} | "
              f"{f'{paused}/{n}' if 'q =' in name or 'model =' in name else '—'} |")
    print()
    print(f"Search results, page by page, equal to a plain icontains of every word over every "
          f"run, and sorted pages equal to the whole order: {'yes' if not problems else 'NO'}")
    print()
    print("For comparison, one page of the plain icontains the history used before (query only, "
          "p50 of 10): " + "; ".join(f"q = {t}: {ms:.0f} ms" for t, ms in plain))
    print()
    print(f"Steady load over HTTP on loopback (Daphne, one process, "
          f"{common.settings_note()}; "
          f"clients loop without pause for {args.duration:.0f} s; session cookie):")
    print()
    print("| scenario | clients | requests | req/s | p50 | p95 | p99 | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, n, r in loads:
        print(f"| {name} | {n} | {r['n']:,} | {r['rps']:.1f} | {r['p50']:.0f} ms | {r['p95']:.0f} ms "
              f"| {r['p99']:.0f} ms | {r['errors']} |")
    failed = [(name, r["error_samples"]) for name, _, r in loads if r["errors"]]
    for name, samples in failed:
        print(f"# errors in {name}: {samples}")
    if failed or problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
