"""What a plan → execute → review run costs besides its model calls: the git work of each
stage, on a repository of ``--files`` files, and a whole run through the engine.

* ``git``: each operation the pattern does, timed alone (median of ``--repeat``): creating the
  run's worktree, resetting it at the start of a stage, committing a one-file change, the
  diff and file list the reviewer and the page get, the merge (a fast-forward of the
  checked-out base branch) and removing the worktree.
* ``run``: one change run end to end — ``changes.start_change`` on SQLite, the engine's
  stages in this process, every call through the gateway and LiteLLM to the offline model
  slowed to L seconds a call, the plan approved and the merge done automatically. Reported
  against the time its model calls take (calls × L): the rest is git, the test command,
  the journal and the stage commits.

    .venv/bin/python tests/benchmarks/bench_change.py [--files 2000] [--latency 0.2] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.benchmarks.bench_concurrency import setup_django  # noqa: E402


def git(repo, *args) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(path: Path, files: int) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "bench@example.com")
    git(path, "config", "user.name", "Bench")
    for i in range(files):
        d = path / f"pkg{i % 40}"
        d.mkdir(exist_ok=True)
        (d / f"mod{i}.py").write_text("".join(f"def f{j}():\n    return {j}\n"
                                              for j in range(25)))
    (path / "README.md").write_text("Helo world.\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_git(tmp: Path, files: int, repeat: int) -> dict[str, float]:
    from agents_app.repos import gitops

    samples: dict[str, list[float]] = {}
    for n in range(repeat):
        repo = make_repo(tmp / f"git{n}", files)
        wt = tmp / f"wt{n}"
        branch = f"quorum/bench-{n}"
        results = {}
        results["create worktree"] = timed(lambda: gitops.create_worktree(repo, wt, branch, "main"))
        base = gitops.head_sha(wt)
        (wt / "stray.txt").write_text("left by an interrupted attempt")
        results["reset worktree"] = timed(lambda: gitops.reset_worktree(wt, base))
        (wt / "README.md").write_text("Hello world.\n")
        results["commit one file"] = timed(lambda: gitops.commit_all(wt, "change",
                                                                     timestamp=1_700_000_000))
        results["diff + file list"] = timed(lambda: (gitops.diff(wt, base),
                                                     gitops.changed_files(wt, base)))
        results["merge (ff of checkout)"] = timed(
            lambda: gitops.merge_into_base(repo, "main", branch, "merge"))
        results["remove worktree"] = timed(lambda: gitops.remove_worktree(repo, wt, branch))
        for name, value in results.items():
            samples.setdefault(name, []).append(value)
    return {name: statistics.median(values) for name, values in samples.items()}


def bench_run(tmp: Path, owner, files: int, latency: float, repeat: int) -> dict:
    from django.conf import settings

    from agents_app import engine
    from agents_app.models import MergeRequest
    from agents_app.patterns.plan_execute_review.service import start_change

    settings.QUORUM_REPO_ROOTS = [str(tmp / "runs")]
    settings.QUORUM_WORKTREE_ROOT = str(tmp / "worktrees")
    command = f"{sys.executable} -c \"print('ok')\""
    settings.QUORUM_TEST_COMMANDS = [command]
    offline = {role: "offline/default" for role in ("planner", "executor", "reviewer")}
    walls, calls = [], []
    for n in range(repeat):
        repo = make_repo(tmp / "runs" / f"r{n}", files)
        start = time.perf_counter()
        run = start_change(owner, repo=str(repo), base="main", models=offline,
                           task='replace "Helo world" with "Hello world" in README.md',
                           test_command=command, auto_approve_plan=True, auto_merge=True,
                           enqueue=False)
        run = engine.run_inline(run.pk)
        walls.append(time.perf_counter() - start)
        assert run.status == "completed", run.error
        assert MergeRequest.objects.get(run=run).status == "merged"
        calls.append(run.calls)
    wall = statistics.median(walls)
    n_calls = statistics.median(calls)
    return {"wall": wall, "calls": n_calls, "model": n_calls * latency,
            "other": wall - n_calls * latency}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="quorum-bench-change-") as tmp_name:
        tmp = Path(tmp_name)
        from tests.stack import free_port, start_redis

        setup_django(tmp, free_port())
        redis = start_redis(tmp)
        try:
            from django.contrib.auth import get_user_model

            from agents_app.llm.gateway import set_offline_latency

            owner = get_user_model().objects.create_user("bench")
            git_figures = bench_git(tmp, args.files, args.repeat)
            set_offline_latency(args.latency)
            run = bench_run(tmp, owner, args.files, args.latency, args.repeat)
        finally:
            redis.stop()

    print(f"# Change runs — {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{git_version()}, repository of {args.files} files, median of {args.repeat}")
    print("\n| git operation | time |\n|---|---:|")
    for name, value in git_figures.items():
        print(f"| {name} | {value * 1000:.0f} ms |")
    print(f"\nWhole run (offline model at L = {args.latency:g} s, auto-approve, auto-merge, "
          "one test command):")
    print(f"wall {run['wall']:.2f} s for {run['calls']:.0f} model calls "
          f"({run['model']:.2f} s of model latency); everything else {run['other']:.2f} s "
          f"({run['other'] / run['calls'] * 1000:.0f} ms per call)")


def git_version() -> str:
    return subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
