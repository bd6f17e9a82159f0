"""Analyzers started ahead of their arguments (common/proc.py ``Warm``, common/prewarm.py):
``manage.py review`` starts bandit and detect-secrets while Django loads. A program started
so runs as the tool would have, in the same scrubbed environment, and never imports from the
directory it reads (the code under review); one never launched is stopped; the review's
report is the same with and without."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common import prewarm, proc
from common.analyzers import AnalyzerInput, runner

ROOT = Path(__file__).resolve().parents[1]
CODE = ("import subprocess\n\n\ndef f(cmd):\n    subprocess.call(cmd, shell=True)\n\n\n"
        "aws_secret_access_key = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEYq1'\n")
ECHO = ("import csv, json, os, sys\n"
        "print(json.dumps({'argv': sys.argv, 'cwd': os.getcwd(), 'stdin': sys.stdin.read(),\n"
        "                  'env': sorted(os.environ), 'home': os.environ.get('HOME'),\n"
        "                  'csv_from': csv.__file__}))\n"
        "sys.exit(3)\n")


@pytest.fixture(autouse=True)
def _nothing_left():
    yield
    prewarm.close()


def test_a_launched_program_gets_its_argv_directory_and_no_stdin(tmp_path):
    warm = proc.Warm(["json"], ECHO, env={"EXTRA": "1"}, home=str(tmp_path / "home"))
    # the directory it reads holds a csv.py (a module the program imports only when it
    # runs): isolated mode never imports it
    (tmp_path / "csv.py").write_text("raise SystemExit('imported from the change')\n")
    time.sleep(0.2)
    result = warm.launch(["tool", "-f", "x.py"], cwd=tmp_path, limit=10_000).wait(30)
    assert result.returncode == 3, result.stderr
    seen = json.loads(result.stdout)
    assert seen["argv"] == ["tool", "-f", "x.py"] and seen["cwd"] == str(tmp_path)
    assert seen["stdin"] == "" and seen["home"] == str(tmp_path / "home")
    assert not seen["csv_from"].startswith(str(tmp_path))
    # the environment ``proc.start`` gives: nothing of ours beyond the scrubbed set
    assert set(seen["env"]) == set(proc.child_env({"EXTRA": "1"}, home="h")), seen["env"]
    assert result.seconds < 5


def test_a_program_that_failed_to_start_reports_its_exit_and_stderr(tmp_path):
    warm = proc.Warm(["no_such_module_here"], ECHO)
    result = warm.launch(["tool"], cwd=tmp_path).wait(30)
    assert result.returncode == 1 and b"No module named 'no_such_module_here'" in result.stderr


def test_one_never_launched_is_stopped_and_leaves_nothing(tmp_path):
    warm = proc.Warm(["json"], ECHO)
    pid = warm.proc.pid
    warm.close()
    warm.close()  # twice is fine
    assert warm.proc.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


def test_a_child_whose_parent_is_gone_exits_on_its_own(tmp_path):
    """The parent killed before launching it: its stdin closes and it exits."""
    code = (f"import sys, time; sys.path.insert(0, {str(ROOT)!r}); from common import proc; "
            "w = proc.Warm(['json'], 'print(1)'); print(w.proc.pid, flush=True); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    for _ in range(100):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the warm child outlived its parent")


def diff_of(*paths: str) -> str:
    return "".join(f"diff --git a/{p} b/{p}\n--- a/{p}\n+++ b/{p}\n@@ -1 +1 @@\n-a\n+b\n"
                   for p in paths)


@pytest.mark.parametrize(("files", "expected"), [
    (("app/views.py",), {"bandit", "detect-secrets"}),
    (("web/app.ts", "README.md"), {"detect-secrets"}),
    (("web/app.ts", "tools/x.py"), {"bandit", "detect-secrets"}),
    (None, {"bandit", "detect-secrets"}),  # no diff file here (a git range, stdin)
])
def test_review_starts_the_tools_its_change_needs(tmp_path, monkeypatch, files, expected):
    monkeypatch.delenv(runner.DISABLE_ENV, raising=False)
    args = ["--format", "json"]
    if files is not None:
        (tmp_path / "c.diff").write_text(diff_of(*files))
        args = [str(tmp_path / "c.diff"), *args]
    else:
        args = ["--git", "repo", "main..x", *args]
    prewarm.for_review(args)
    assert set(prewarm._started) == expected


def test_tools_turned_off_are_not_started_and_others_elsewhere_not_taken(monkeypatch, tmp_path):
    monkeypatch.setenv(runner.DISABLE_ENV, "bandit")
    prewarm.start("bandit", "detect-secrets")
    assert set(prewarm._started) == {"detect-secrets"}
    assert prewarm.take("detect-secrets", "/usr/local/bin/detect-secrets") is None
    home = prewarm._homes[0]
    assert Path(home).is_dir()
    prewarm.close()
    assert not Path(home).exists() and prewarm._started == {}


def test_the_report_is_the_same_with_tools_started_ahead(monkeypatch):
    monkeypatch.delenv(runner.DISABLE_ENV, raising=False)
    inputs = [AnalyzerInput(path="app/a.py", text=CODE, changed_lines=None)]
    cold = runner.run_analyzers(inputs)
    prewarm.start("bandit", "detect-secrets")
    launched = []
    real = proc.Warm.launch
    monkeypatch.setattr(proc.Warm, "launch", lambda self, argv, **kw: (
        launched.append(argv[0]) or real(self, argv, **kw)))
    warm = runner.run_analyzers(inputs)
    assert sorted(launched) == ["-c", str(Path(sys.executable).parent / "bandit")]
    assert prewarm._started == {}
    assert warm.evidence == cold.evidence and warm.examined == cold.examined
    assert warm.errors == cold.errors == []
    assert warm.examined == {"app/a.py": ["ruff", "bandit", "semgrep", "detect-secrets"]}
    assert {e["rule"] for e in warm.evidence} >= {"B404", "B602"}


def test_a_home_of_its_own_is_removed_when_it_is_never_launched(tmp_path):
    """Its parent killed (no exit handler ran): the child removes the directory itself."""
    code = (f"import sys, time; sys.path.insert(0, {str(ROOT)!r}); from common import prewarm; "
            "prewarm.start('detect-secrets'); print(prewarm._homes[0], flush=True); "
            "time.sleep(60)")
    env = {k: v for k, v in os.environ.items() if k != runner.DISABLE_ENV}
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env=env)
    home = Path(parent.stdout.readline().strip())
    assert home.is_dir() and home.name.startswith("quorum-detect-secrets-")
    time.sleep(0.5)
    parent.kill()
    parent.wait()
    for _ in range(100):
        if not home.exists():
            break
        time.sleep(0.05)
    assert not home.exists()
