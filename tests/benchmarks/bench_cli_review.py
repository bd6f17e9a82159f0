"""``manage.py review`` of a 10-line diff, offline, as a person or a CI job runs it: a fresh
process each time (Django start-up, the migration check, the analyzers' processes, the
pipeline's stages with the built-in offline model, the export), DEBUG=false, on a migrated
temporary SQLite database. Issue 17's target: ≤ 1.5 s wall on a two-core machine.

For each diff (Python, TypeScript) and each tree (``--tree``, default this one; give two to
compare an old checkout with this one: rounds are interleaved, so both see the same load),
it prints wall p50/p95, CPU (user+system of the command and its children) and the peak RSS of
the largest process, then a breakdown of one run per tree:

* phases, timed inside the process (``--phases`` wraps a few functions from the outside):
  settings, app loading, the command's imports, the migration check, the review itself
  (of which the analyzers and LiteLLM's import, if it happens), exit;
* ``python -X importtime``: the packages whose imports cost most (self time, summed per
  top-level package; importtime's own bookkeeping inflates the figures);
* ``cProfile``: the functions with the most cumulative time (also inflated by the profiler).

    .venv/bin/python tests/benchmarks/bench_cli_review.py [--runs 7] [--tree /old/checkout]
        [--lang python,typescript] [--no-breakdown] [--debug]

The first run of each tree is a warm-up (it writes the bytecode caches a user's checkout
has after its first command) and is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.benchmarks.common import machine, pct, positive  # noqa: E402

TARGET_SECONDS = 1.5


def _new_file(path: str, lines: list[str]) -> str:
    body = "".join(f"+{ln}\n" for ln in lines)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..1111111\n"
            f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}")


# Ten added lines each, with something for the analyzers to find (an injection, a key).
DIFFS = {
    "python": _new_file("app/users.py", [
        "import sqlite3",
        "",
        "API_TOKEN = \"sk_live_\" + \"51HqLyjWDarjtT1zdp7dcXYZabc\"",
        "",
        "def find_user(db: sqlite3.Connection, user_id: str):",
        "    cur = db.cursor()",
        "    cur.execute(\"SELECT * FROM users WHERE id = '%s'\" % user_id)",
        "    return cur.fetchone()",
        "",
        "def token():  return API_TOKEN"]),
    "typescript": _new_file("src/users.ts", [
        "const STRIPE_KEY = \"sk_live_51HqLyjWDarjtT1zdp7dcXYZabc\";",
        "",
        "export async function findUser(db: any, id: string) {",
        "  return db.query(`select * from users where id = ${id}`);",
        "}",
        "",
        "export function charge(): string {",
        "  return STRIPE_KEY;",
        "}",
        "export const ready = true;"]),
}

# The phase probe: run as ``python -c PROBE manage.py review …`` it wraps a few functions from
# the outside and writes their times (seconds since the interpreter started) to a JSON file.
PROBE = r"""
import json, os, runpy, sys, time
T = {"start": time.monotonic() - (time.time() - float(os.environ["BENCH_T0"]))}
mark = lambda name: T.setdefault(name, time.monotonic())
import django, django.conf
_setup, _settings_setup = django.setup, django.conf.LazySettings._setup
def settings_setup(self, *a, **k):
    mark("settings_begin"); r = _settings_setup(self, *a, **k); mark("settings_end"); return r
def setup(*a, **k):
    mark("setup_begin"); _setup(*a, **k); mark("setup_end")
    import agents_app.cli as cli, agents_app.llm.runtime as rt, common.analyzers as ar
    _req, _load, _run = cli.require_migrated, rt._load, ar.run_analyzers
    def req(*a, **k):
        mark("migrations_begin"); r = _req(*a, **k); mark("migrations_end"); return r
    def load(*a, **k):
        mark("litellm_begin"); r = _load(*a, **k); mark("litellm_end"); return r
    def run(*a, **k):
        mark("analyzers_begin"); r = _run(*a, **k); mark("analyzers_end"); return r
    cli.require_migrated, rt._load, ar.run_analyzers = req, load, run  # as the callers look them up
    import reviews_app.management.commands.review as cmd
    mark("command_imported")
    _handle = cmd.Command.handle
    def handle(self, *a, **k):
        mark("handle_begin")
        try:
            return _handle(self, *a, **k)
        finally:
            mark("handle_end")
    cmd.Command.handle = handle
django.setup, django.conf.LazySettings._setup = setup, settings_setup
def dump():
    mark("exit")
    with open(os.environ["BENCH_PHASES"], "w") as f:
        json.dump({k: v - T["start"] for k, v in T.items()}, f)
import atexit; atexit.register(dump)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(var_dir: Path, debug: bool, redis_port: int) -> dict[str, str]:
    """The environment of a user's shell: no provider key (so the offline model), no
    PYTHONDONTWRITEBYTECODE (a checkout keeps its bytecode caches), DEBUG as asked."""
    env = {k: v for k, v in os.environ.items()
           if not re.search(r"(_API_KEY|_TOKEN|_API_BASE)$", k)
           and k not in ("PYTHONDONTWRITEBYTECODE", "DJANGO_SETTINGS_MODULE", "DATABASE_URL",
                         "QUORUM_DEFAULT_MODEL", "QUORUM_VAR_DIR", "DEBUG")
           and not k.startswith("QUORUM_MODEL_")}
    env.update({"DEBUG": "true" if debug else "false", "SECRET_KEY": "bench-cli-review",
                "QUORUM_VAR_DIR": str(var_dir),
                "DATABASE_URL": f"sqlite:///{var_dir / 'cli.sqlite3'}",
                # Redis is not running (as after `make dev` was stopped): the live
                # announcements fail fast and the review carries on.
                "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0"})
    return env


def run_once(tree: Path, diff: Path, env: dict[str, str], prefix: list[str] | None = None,
             extra_env: dict[str, str] | None = None) -> dict:
    """One fresh ``manage.py review``: wall time, CPU (user + system) and peak RSS from
    ``wait4``, which covers the command and every child it waited for (the analyzers); the
    peak is the largest single process's."""
    cmd = [sys.executable, *(prefix or []), str(tree / "manage.py"), "review", str(diff),
           "--format", "json"]
    full_env = {**env, **(extra_env or {}), "BENCH_T0": repr(time.time())}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        child = subprocess.Popen(cmd, cwd=tree, env=full_env, stdout=out, stderr=err)  # noqa: S603
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.monotonic() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return {"wall": wall, "rc": child.returncode, "cpu": usage.ru_utime + usage.ru_stime,
                "rss_mb": usage.ru_maxrss / 1024,
                "stdout": out.read().decode(errors="replace"),
                "stderr": err.read().decode(errors="replace")}


def verdict_of(result: dict) -> str:
    """The exit status, verdict, findings (category, severity, line) and coverage of a run:
    what must stay the same when the command gets faster."""
    try:
        data = json.loads(result["stdout"])
    except ValueError:
        return f"no JSON (exit {result['rc']}): {result['stderr'][-300:]}"
    verdict = (data.get("review") or {}).get("verdict") or {}
    findings = sorted(f"{f.get('severity')}:{f.get('category')}@{f.get('line')}"
                      for f in data.get("findings") or [])
    coverage = data.get("coverage")
    return (f"exit {result['rc']}, verdict {verdict.get('final')}, findings "
            f"{', '.join(findings) or 'none'}; coverage {json.dumps(coverage)[:200]}")


def importtime_summary(tree: Path, diff: Path, env: dict[str, str], top: int = 12) -> list[str]:
    result = run_once(tree, diff, env, prefix=["-X", "importtime"])
    per_pkg: Counter[str] = Counter()
    for line in result["stderr"].splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|\s*(\S+)", line)
        if m:
            per_pkg[m.group(3).split(".")[0]] += int(m.group(1))
    total = sum(per_pkg.values())
    lines = [f"    all imports {total / 1e6:.2f} s (self time, inflated by -X importtime)"]
    lines += [f"    {us / 1e6:6.2f} s  {pkg}" for pkg, us in per_pkg.most_common(top)]
    return lines


def profile_summary(tree: Path, diff: Path, env: dict[str, str], top: int = 25) -> list[str]:
    import pstats

    with tempfile.NamedTemporaryFile(suffix=".prof", delete=False) as f:
        path = f.name
    try:
        run_once(tree, diff, env, prefix=["-m", "cProfile", "-o", path])
        stats = pstats.Stats(path)
        rows = sorted(stats.stats.items(), key=lambda kv: kv[1][3], reverse=True)  # type: ignore[attr-defined]
        lines = []
        for (file, line, func), (_cc, _nc, _tt, ct, _callers) in rows:
            if "importlib" in file or file.startswith("<") or func.startswith("<"):
                continue
            short = re.sub(r"^.*?site-packages/", "", file).replace(str(tree) + "/", "")
            lines.append(f"    {ct:6.2f} s  {short}:{line}({func})")
            if len(lines) >= top:
                break
        return lines
    finally:
        os.unlink(path)


def phases(tree: Path, diff: Path, env: dict[str, str], runs: int) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "phases.json"
        samples = []
        for _ in range(runs):
            run_once(tree, diff, env, prefix=["-c", PROBE], extra_env={"BENCH_PHASES": str(out)})
            samples.append(json.loads(out.read_text()))
    med = {k: statistics.median(s[k] for s in samples if k in s)
           for k in samples[0] if all(k in s for s in samples)}

    def span(a: str, b: str) -> str:
        return f"{med[b] - med[a]:5.2f} s" if a in med and b in med else "  n/a  "

    rows = [("interpreter and manage.py", "start", "settings_begin"),
            ("settings (config/settings.py)", "settings_begin", "settings_end"),
            ("app loading (INSTALLED_APPS, ready())", "settings_end", "setup_end"),
            ("the command's imports", "setup_end", "command_imported"),
            ("until the migration check", "command_imported", "migrations_begin"),
            ("migration check", "migrations_begin", "migrations_end"),
            ("argument parsing", "migrations_end", "handle_begin"),
            ("review (handle)", "handle_begin", "handle_end"),
            ("  of which the analyzers", "analyzers_begin", "analyzers_end"),
            ("  of which LiteLLM's import", "litellm_begin", "litellm_end"),
            ("exit", "handle_end", "exit"),
            ("total, start to exit", "start", "exit")]
    lines = [f"    {name:40s} {span(a, b)}" for name, a, b in rows]
    if "litellm_begin" not in med:
        lines.append("    (LiteLLM was not imported)")
    return lines


def summary(name: str, results: list[dict]) -> str:
    walls = [r["wall"] for r in results]
    cpus = [r["cpu"] for r in results]
    rss = [r["rss_mb"] for r in results]
    return (f"  {name:38s} wall p50 {pct(walls, 50):5.2f} s  p95 {pct(walls, 95):5.2f} s  "
            f"CPU p50 {statistics.median(cpus):5.2f} s  peak RSS {max(rss):4.0f} MB  "
            f"(n={len(walls)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=positive(int, 1, 100), default=7,
                        help="measured runs per tree and diff")
    parser.add_argument("--tree", action="append", default=[],
                        help="a checkout to measure (repeatable; default: this one)")
    parser.add_argument("--lang", default="python,typescript")
    parser.add_argument("--debug", action="store_true", help="DEBUG=true (as the README's "
                        "commands) instead of false")
    parser.add_argument("--no-breakdown", action="store_true")
    parser.add_argument("--phase-runs", type=positive(int, 1, 20), default=3)
    parser.add_argument("--summary", type=Path, default=None,
                        help="also write the first tree's figures (all languages) as JSON here")
    parser.error = lambda message: parser.exit(2, f"bench_cli_review: {message}\n")
    args = parser.parse_args()
    trees = [Path(t).resolve() for t in args.tree] or [ROOT]
    langs = [x.strip() for x in args.lang.split(",") if x.strip()]
    print(f"manage.py review of a 10-line diff, offline; {machine()}; "
          f"DEBUG={'true' if args.debug else 'false'}; "
          f"load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    redis_port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        envs, diffs = {}, {}
        for lang in langs:
            diffs[lang] = Path(tmp) / f"change-{lang}.diff"
            diffs[lang].write_text(DIFFS[lang])
        for i, tree in enumerate(trees):
            var = Path(tmp) / f"var{i}"
            var.mkdir()
            envs[tree] = child_env(var, args.debug, redis_port)
            subprocess.run([sys.executable, str(tree / "manage.py"), "migrate",  # noqa: S603
                            "--noinput", "-v0"], cwd=tree, env=envs[tree], check=True)
            for lang in langs:  # warm-up: bytecode caches, the tools' first start
                first = run_once(tree, diffs[lang], envs[tree])
                print(f"  {tree.name} {lang}: {verdict_of(first)}")
        results: dict[tuple[Path, str], list[dict]] = {(t, x): [] for t in trees for x in langs}
        for _ in range(args.runs):  # interleaved: tree A, tree B, tree A, ...
            for lang in langs:
                for tree in trees:
                    results[(tree, lang)].append(run_once(tree, diffs[lang], envs[tree]))
        print(f"\n{args.runs} runs each, interleaved; target ≤ {TARGET_SECONDS} s wall")
        for lang in langs:
            for tree in trees:
                print(summary(f"{lang} ({tree.name})", results[(tree, lang)]))
            first = statistics.median(r["wall"] for r in results[(trees[0], lang)])
            for tree in trees[1:]:
                other = statistics.median(r["wall"] for r in results[(tree, lang)])
                print(f"  {lang}: {tree.name} ÷ {trees[0].name}, wall p50: {other / first:.2f}")
        if args.summary is not None:
            walls = [r["wall"] for x in langs for r in results[(trees[0], x)]]
            args.summary.write_text(json.dumps({
                "p50_s": pct(walls, 50), "p95_s": pct(walls, 95), "languages": langs,
                "rss_mb": max(r["rss_mb"] for x in langs for r in results[(trees[0], x)])}))
        if not args.no_breakdown:
            for tree in trees:
                for lang in langs:
                    print(f"\nBreakdown, {tree.name}, {lang}: phases (median of "
                          f"{args.phase_runs} runs)")
                    print("\n".join(phases(tree, diffs[lang], envs[tree], args.phase_runs)))
                print(f"\nBreakdown, {tree.name}, {langs[0]}: python -X importtime, "
                      "packages by self time")
                print("\n".join(importtime_summary(tree, diffs[langs[0]], envs[tree])))
                print(f"\nBreakdown, {tree.name}, {langs[0]}: cProfile, cumulative")
                print("\n".join(profile_summary(tree, diffs[langs[0]], envs[tree])))
    print(f"\nload average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
