"""Fixes proven before they are offered (issue 16): the patch, the analyzer check, the test
command in a throwaway worktree, and the honest "not proven" notes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reviews_app.fixes import check as fixcheck
from reviews_app.fixes import proof as fixproof
from reviews_app.fixes import testrun as fixtests
from reviews_app.pipeline.diffs.parse import prepare

ORIGINAL = ("import subprocess\n\n\ndef run(cmd):\n    return subprocess.call(cmd, shell=True)\n"
            "\n\ndef parse(text):\n    return eval(text)\n")
DIFF = "diff --git a/app/run.py b/app/run.py\nnew file mode 100644\n--- /dev/null\n" \
       "+++ b/app/run.py\n@@ -0,0 +1,9 @@\n" + "".join(f"+{ln}\n" for ln in ORIGINAL.splitlines())
SAFE = "```python\nreturn int(text)\n```"


def files(content: str | None = ORIGINAL) -> list[dict]:
    return prepare(DIFF, contents={"app/run.py": content} if content is not None else None).files


def finding(**kw) -> dict:
    return {"key": "S1", "file": "app/run.py", "line": 9, "end_line": 9, "severity": "high",
            "category": "security", "title": "eval", "confidence": 0.9,
            "suggestion": SAFE, "status": "kept"} | kw


# --- the patch ------------------------------------------------------------------------------------
def test_a_code_suggestion_becomes_a_patch_at_the_lines_indentation():
    patch, info = fixproof.make_patch(finding(), ORIGINAL)
    assert info == {}
    assert patch.after.splitlines()[8] == "    return int(text)"
    assert "-    return eval(text)" in patch.diff
    assert "+    return int(text)" in patch.diff
    assert patch.diff.startswith("--- a/app/run.py\n+++ b/app/run.py\n@@ ")
    assert fixproof.apply_diff(ORIGINAL, patch.diff) == patch.after


@pytest.mark.parametrize(("kw", "content", "status", "words"), [
    ({"suggestion": "Use a list of arguments instead of a shell string."}, ORIGINAL, "none",
     "not code"),
    ({"line": None}, ORIGINAL, "not_proven", "names no line"),
    ({}, None, "not_proven", "full file is not available"),
    ({"line": 9, "end_line": 12}, ORIGINAL, "not_proven", "does not apply"),
    ({"suggestion": "```python\nreturn eval(text)\n```"}, ORIGINAL,
     "none", "same as the code"),
])
def test_no_patch_says_why(kw, content, status, words):
    patch, info = fixproof.make_patch(finding(**kw), content)
    assert patch is None
    assert info["status"] == status and words in info["reason"]


def test_a_fix_does_not_apply_when_its_lines_changed():
    patch, _ = fixproof.make_patch(finding(), ORIGINAL)
    moved = ORIGINAL.replace("eval(text)", "eval(text.strip())")
    with pytest.raises(fixproof.FixDoesNotApply, match="line 9 reads"):
        fixproof.apply_diff(moved, patch.diff)
    with pytest.raises(fixproof.FixDoesNotApply, match="no change"):
        fixproof.apply_diff(ORIGINAL, "")


# --- the proof: analyzers ------------------------------------------------------------------------
def test_a_safe_fix_is_proven_by_the_analyzers():
    kept = [finding()]
    done = fixcheck.prove(kept, files())
    fix = kept[0]["fix"]
    assert done["tried"] == 1 and done["proven"] == 1, fix
    assert fix["status"] == "proven"
    names = {c["name"]: c for c in fix["checks"]}
    assert names["applies"]["ok"] is True
    assert names["no new analyzer finding"]["ok"] is True
    assert "gone" in names["no new analyzer finding"]["detail"]  # the eval on line 9 went
    assert names["tests pass"]["ok"] is None and "no test command" in names["tests pass"]["detail"]
    assert "+    return int(text)" in fix["diff"]


def test_a_fix_that_adds_eval_is_not_proven():
    kept = [finding(line=5, end_line=5, suggestion="```python\nreturn eval(cmd)\n```")]
    fixcheck.prove(kept, files())
    fix = kept[0]["fix"]
    assert fix["status"] == "not_proven", fix
    assert "new analyzer results" in fix["reason"] and "eval" in fix["reason"].lower()
    assert fix["diff"]  # the tried diff stays visible with the reason


def test_a_fix_that_writes_a_secret_is_not_proven():
    key = "AKIA" + "Q" * 16
    kept = [finding(suggestion=f'```python\nreturn "{key}"\n```')]
    fixcheck.prove(kept, files())
    assert kept[0]["fix"]["status"] == "not_proven"
    assert "secret" in kept[0]["fix"]["reason"]


PASTED = ("diff --git a/app/run.py b/app/run.py\n--- a/app/run.py\n+++ b/app/run.py\n"
          "@@ -7,3 +7,3 @@\n \n def parse(text):\n-    return text\n+    return eval(text)\n")


def test_without_the_full_file_the_fix_is_honestly_not_proven():
    kept = [finding()]
    done = fixcheck.prove(kept, prepare(PASTED).files)
    assert done["tried"] == 0
    assert kept[0]["fix"]["status"] == "not_proven"
    assert "full file is not available" in kept[0]["fix"]["reason"]


def test_only_the_cap_most_severe_fixes_are_tried():
    kept = [finding(key="L1", severity="low"), finding(key="H1", severity="high",
                                                       suggestion="```python\nreturn 0\n```")]
    done = fixcheck.prove(kept, files(), cap=1)
    assert done == done | {"tried": 1, "capped": 1}
    by_key = {f["key"]: f["fix"] for f in kept}
    assert by_key["H1"]["status"] == "proven"
    assert by_key["L1"]["status"] == "not_proven" and "Not tried" in by_key["L1"]["reason"]


def test_two_fixes_in_one_file_are_checked_each_on_its_own():
    kept = [finding(key="A"), finding(key="B", line=8, end_line=8,
                                      suggestion="```python\ndef parse(text: str):\n```")]
    done = fixcheck.prove(kept, files())
    assert done["tried"] == 2 and done["proven"] == 2, [f["fix"] for f in kept]


def test_the_analyzers_not_running_is_no_proof(monkeypatch):
    from common import analyzers
    monkeypatch.setattr(analyzers, "run_analyzers", lambda inputs, timeout=60:
                        analyzers.AnalyzerReport(errors=["ruff is not installed"]))
    kept = [finding()]
    fixcheck.prove(kept, files())
    assert kept[0]["fix"]["status"] == "not_proven"
    assert "did not run" in kept[0]["fix"]["reason"]


# --- the test command ----------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "words"), [
    ("pytest -q\x00rm", "control characters"), ("   ", "empty"), ('pytest "-q', "could not be read"),
    (["pytest"], "should be a text"), ("x" * 2000, "longer than"),
])
def test_a_bad_test_command_is_a_note_not_a_crash(value, words):
    argv, note = fixtests.parse_command(value)
    assert argv == [] and words in note


def test_a_test_command_is_an_argument_list_never_a_shell():
    argv, note = fixtests.parse_command("python -c 'print(1)' && rm -rf /")
    assert note == "" and argv == ["python", "-c", "print(1)", "&&", "rm", "-rf", "/"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


CHECK = ("import pathlib, sys\n"
         "text = pathlib.Path('app/run.py').read_text()\n"
         "sys.exit(1 if 'BROKEN' in text else 0)\n")


@pytest.fixture
def repo(tmp_path) -> tuple[Path, str]:
    top = tmp_path / "repo"
    (top / "app").mkdir(parents=True)
    git(top, "init", "-q", "-b", "main")
    (top / "app" / "run.py").write_text(ORIGINAL)
    (top / "check.py").write_text(CHECK)
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "one")
    return top, git(top, "rev-parse", "HEAD")


def _opts(repo, tmp_path, argv=None) -> dict:
    top, head = repo
    return {"repo": str(top), "head": head, "work_root": str(tmp_path / "proofs"),
            "test_command": argv or [sys.executable, "check.py"], "timeout": 60}


def test_tests_pass_and_the_throwaway_worktree_is_gone(repo, tmp_path):
    kept = [finding()]
    state = {"options": {"fixes": _opts(repo, tmp_path)}, "files": files()}
    notes = fixcheck.prove_review(kept, state)
    fix = kept[0]["fix"]
    assert fix["status"] == "proven", fix
    tests = next(c for c in fix["checks"] if c["name"] == "tests pass")
    assert tests["ok"] is True and "exit code 0" in tests["detail"]
    assert "1 of 1" in notes[0]
    assert list((tmp_path / "proofs").iterdir()) == []
    assert git(repo[0], "worktree", "list").count("\n") == 0  # only the main checkout
    assert git(repo[0], "status", "--porcelain") == ""


def test_failing_tests_mean_not_proven(repo, tmp_path):
    kept = [finding(suggestion="```python\nreturn 'BROKEN'\n```")]
    fixcheck.prove_review(kept, {"options": {"fixes": _opts(repo, tmp_path)}, "files": files()})
    fix = kept[0]["fix"]
    assert fix["status"] == "not_proven", fix
    assert "exit code 1" in fix["reason"]
    assert list((tmp_path / "proofs").iterdir()) == []


def test_tests_that_fail_already_prove_nothing(repo, tmp_path):
    top, _ = repo
    (top / "app" / "run.py").write_text(ORIGINAL + "# BROKEN\n")
    git(top, "commit", "-qam", "broken")
    opts = _opts((top, git(top, "rev-parse", "HEAD")), tmp_path)
    kept = [finding()]
    fixcheck.prove_review(kept, {"options": {"fixes": opts}, "files": files()})
    assert "already fail without the fix" in kept[0]["fix"]["reason"]


def test_a_missing_test_program_is_a_plain_failure(repo, tmp_path):
    kept = [finding()]
    opts = _opts(repo, tmp_path, argv=["no-such-test-runner-xyz"])
    fixcheck.prove_review(kept, {"options": {"fixes": opts}, "files": files()})
    assert kept[0]["fix"]["status"] == "not_proven"
    assert "could not run" in kept[0]["fix"]["reason"]


def test_a_path_outside_the_worktree_is_never_written(tmp_path):
    root = tmp_path / "wt"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("x")
    (root / "link").symlink_to(tmp_path / "secret.txt")
    assert fixtests.inside(root, "../secret.txt") is None
    assert fixtests.inside(root, "/etc/passwd") is None
    assert fixtests.inside(root, "link") is None
    assert fixtests.inside(root, "ok.py") == root / "ok.py"


def test_two_fixes_of_one_file_apply_one_after_the_other():
    first, _ = fixproof.make_patch(finding(key="A", line=5, end_line=5,
                                           suggestion="```python\nx = 1\nreturn x\n```"),
                                   ORIGINAL)
    second, _ = fixproof.make_patch(finding(key="B"), ORIGINAL)
    both = fixproof.apply_diff(fixproof.apply_diff(ORIGINAL, first.diff), second.diff)
    assert "    x = 1\n    return x\n" in both and "return int(text)" in both
    # the same lines changed by two fixes: the second does not apply
    other, _ = fixproof.make_patch(finding(key="C", suggestion="```python\nreturn str(text)\n```"),
                                   ORIGINAL)
    with pytest.raises(fixproof.FixDoesNotApply):
        fixproof.apply_diff(fixproof.apply_diff(ORIGINAL, second.diff), other.diff)


# --- in the review's synthesis --------------------------------------------------------------------
def test_the_synthesis_proves_a_reviewers_code_suggestion():
    from agents_app.patterns.testing import FunctionModel
    from tests.test_review_pipeline import APP, Script, file_dict, finding, run_to_gate

    fixed = finding("security", "high", 4, "SQL injection", suggestion=(
        "Bind the value:\n```python\nreturn db.execute(\"select * from users where id = ?\", "
        "(uid,))\n```"))
    prose = finding("architecture", "medium", 6, "Name it better", suggestion="Rename total.")
    content = "\n".join(APP) + "\n"
    state_files = [file_dict(content=content)]
    from tests.test_review_pipeline import new_state
    result, _ = run_to_gate(FunctionModel(Script(found={
        "security": {"findings": [fixed]}, "architecture": {"findings": [prose]}})),
        state=new_state(files=state_files))
    record = result.records[0]
    by_title = {f["title"]: f["fix"] for f in record.kept}
    assert by_title["SQL injection"]["status"] == "proven", by_title["SQL injection"]
    assert '+    return db.execute("select * from users where id = ?", (uid,))' in \
        by_title["SQL injection"]["diff"]
    assert by_title["Name it better"]["status"] == "none"
    assert any(n.startswith("Fixes: 1 of 1 suggested code change(s) proven") for n in record.notes)


def test_a_stored_fix_with_a_masked_secret_still_applies_to_the_real_file():
    from common.secret_keys import mask
    key = "AKIA" + "Z" * 16
    text = f'import os\n\nKEY = "{key}"\nprint(KEY)\n'
    patch, _ = fixproof.make_patch({"key": "K", "file": "a.py", "line": 3, "end_line": 3,
                                    "suggestion": '```python\nKEY = os.environ["KEY"]\n```'},
                                   text)
    stored = mask(patch.diff)
    assert key not in stored
    assert fixproof.apply_diff(text, stored) == patch.after
    # a context line keeps the file's own text, not its masked copy
    text2 = f'KEY = "{key}"\nx = eval("1")\n'
    p2, _ = fixproof.make_patch({"key": "E", "file": "a.py", "line": 2, "end_line": 2,
                                 "suggestion": "```python\nx = 1\n```"}, text2)
    assert fixproof.apply_diff(text2, mask(p2.diff)) == f'KEY = "{key}"\nx = 1\n'


def test_tests_not_run_for_lack_of_time_prove_nothing(repo, tmp_path):
    kept = [finding(key="A"), finding(key="B", line=8, end_line=8,
                                      suggestion="```python\ndef parse(text: str):\n```")]
    opts = {**_opts(repo, tmp_path), "budget": 0.0}
    fixcheck.prove_review(kept, {"options": {"fixes": opts}, "files": files()})
    fixes = [f["fix"] for f in kept]
    assert all(f["status"] == "not_proven" for f in fixes), fixes
    assert all("were spent" in f["reason"] for f in fixes)
