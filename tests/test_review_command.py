"""``manage.py review``: the same pipeline headlessly, its exports, exit status and the
bad-input corpus. Runs the real engine with the offline model (threads: transactional)."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from agents_app.models import ModelCall, Run
from reviews_app.models import Review
from tests.review_corpus import CASES, GOOD, NO_NEWLINE, git_repo

pytestmark = pytest.mark.django_db(transaction=True)


def review(*args) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("review", *args, stdout=out, stderr=err)
    except SystemExit as exc:
        return int(exc.code), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def test_a_risky_diff_is_not_approved_and_prints_sarif(tmp_path):
    path = tmp_path / "change.diff"
    path.write_text(GOOD)
    code, out, err = review(str(path), "--format", "sarif")
    assert code == 1, err
    sarif = json.loads(out)
    rules = {r["ruleId"] for r in sarif["runs"][0]["results"]}
    # Analyzer findings carry the analyzer's own rule id, not a Quorum category.
    assert {"B602", "B307"} <= rules and all(re.fullmatch(r"[A-Z]+[0-9]+", r) for r in rules)
    locations = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                 for r in sarif["runs"][0]["results"]]
    assert set(locations) == {"app/users.py"}
    assert "Verdict: request_changes" in err
    run = Run.objects.get()
    assert run.status == "completed" and run.review.final_verdict == "request_changes"
    # Three reviewers and the cross-file check, their reflections, one synthesis: each call
    # recorded once.
    stages = sorted(ModelCall.objects.values_list("stage", flat=True))
    assert stages.count("review") == 4 and stages.count("synthesize") == 1
    assert ModelCall.objects.filter(stage="review", role="checker").count() == 1


def test_a_clean_change_is_approved_with_exit_status_zero(tmp_path):
    path = tmp_path / "conf.patch"
    path.write_text(NO_NEWLINE)
    code, out, err = review(str(path), "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["review"]["verdict"]["final"] == "approve" and data["findings"] == []


def test_markdown_is_the_default_and_models_can_be_chosen(tmp_path):
    path = tmp_path / "change.diff"
    path.write_text(GOOD)
    code, out, _ = review(str(path), "--model", "style=offline/default")
    assert code == 1 and out.startswith("# ") and "## " in out
    assert Run.objects.get().models_used["style"] == "offline/default"


@pytest.mark.parametrize("spec", ["style", "judge=offline/default", "style=bad model!"])
def test_bad_model_options_are_refused(tmp_path, spec):
    path = tmp_path / "c.diff"
    path.write_text(GOOD)
    with pytest.raises(CommandError):
        review(str(path), "--model", spec)
    assert not Run.objects.exists()


def test_missing_file_and_range_outside_roots_exit_2_with_a_message(tmp_path, settings):
    code, _, err = review(str(tmp_path / "nope.diff"))
    assert code == 2 and "No such file" in err
    settings.QUORUM_REPO_ROOTS = []
    code, _, err = review("--git", str(tmp_path), "main..HEAD")
    assert code == 2 and "QUORUM_REPO_ROOTS" in err
    assert not Review.objects.exists()


def test_git_range_review(tmp_path, settings):
    repo = git_repo(tmp_path / "repo", {"calc.py": "def double(x):\n    return 2 * x\n"},
                    {"calc.py": "def double(x):\n    return 2 * x\n\n\n"
                                "def run(expr):\n    return eval(expr)\n"})
    settings.QUORUM_REPO_ROOTS = [str(tmp_path)]
    code, out, err = review("--git", str(repo), "main~1..main", "--format", "json")
    assert code == 1, err
    data = json.loads(out)
    assert any(f["file"] == "calc.py" and f["line"] == 6 for f in data["findings"])
    assert Review.objects.get().files[0]["mode"] == "heavy"


@pytest.mark.parametrize(("name", "data", "expect"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_corpus_through_the_command(tmp_path, name, data, expect):
    path = tmp_path / "input.diff"
    path.write_bytes(data)
    code, out, err = review(str(path), "--format", "json")
    kind, detail = expect
    if kind == "error":
        assert code == 2 and detail in err
        assert not Review.objects.exists() and not Run.objects.exists()
        return
    assert code in (0, 1), err
    result = json.loads(out)
    reasons = {c["reason"] for c in result["coverage"]}
    # what the parser left to the models, the offline model did not read: not reviewed
    detail = {"not_examined" if r == "model_only" else r for r in detail}
    assert detail <= reasons
    assert code == 1 or not {"not_examined", "over_file_limit", "unreadable", "not_utf8",
                             "nul_bytes"} & reasons
    assert Run.objects.get().status == "completed"


def test_nul_bytes_in_a_clean_diff_are_said_and_never_approved(tmp_path):
    """A diff file with NUL bytes (refused by PostgreSQL's text as they are) is reviewed with
    them replaced; the coverage says how many, and the review cannot pass as an approval."""
    clean = NO_NEWLINE.replace("+DEBUG = False", "+DEBUG = False  # \x00\x00")
    assert clean.count("\x00") == 2
    path = tmp_path / "nul.diff"
    path.write_text(clean)
    code, out, err = review(str(path), "--format", "json")
    assert code == 1, err
    notes = [c for c in json.loads(out)["coverage"] if c["reason"] == "nul_bytes"]
    assert len(notes) == 1 and "2 NUL bytes" in notes[0]["detail"], notes
    assert "Incomplete review" in err
    assert "Reviewed in part: nul.diff: The diff held 2 NUL bytes" in err
    assert "Not reviewed: nul.diff" not in err
    review_row = Review.objects.get()
    assert "\x00" not in review_row.diff_text and review_row.diff_text.count("\ufffd") == 2


def test_an_input_over_the_upload_limit_exits_2_and_saves_nothing(tmp_path, settings):
    settings.QUORUM_REVIEW_MAX_UPLOAD_BYTES = 10_000
    path = tmp_path / "big.diff"
    path.write_text(GOOD * 100)
    code, _, err = review(str(path))
    assert code == 2 and "big.diff is 26 KB; the limit is 10 KB" in err
    assert not Run.objects.exists()


def test_stdin_input(monkeypatch):
    import io
    import sys

    class Stdin:
        buffer = io.BytesIO(GOOD.encode())

    monkeypatch.setattr(sys, "stdin", Stdin())
    code, out, err = review("-", "--format", "json")
    assert code == 1, err
    assert json.loads(out)["review"]["source"]["label"] == "stdin"


def test_ci_reviews_are_not_refused_by_a_daily_count_unless_one_is_set(
        tmp_path, settings, django_user_model, monkeypatch):
    from reviews_app import services

    someone = django_user_model.objects.create_user("ci-history")
    for _ in range(25):  # a busy CI day of offline reviews
        inp = services.from_text(GOOD)
        services.start_review(someone, inp, services.prepare(inp), enqueue=False)
    path = tmp_path / "change.diff"
    path.write_text(GOOD)
    code, out, err = review(str(path), "--format", "json")
    assert code == 1, err
    assert json.loads(out)["findings"]
    # The count limit is opt-in; when set, the refusal says which setting raises it.
    settings.QUORUM_REVIEW_DAILY_LIMIT = 26
    code, out, err = review(str(path))
    assert code == 2 and out == ""
    assert "daily limit of 26 reviews is reached" in err and "QUORUM_REVIEW_DAILY_LIMIT" in err
    assert Review.objects.count() == 26
    # The cost cap refuses priced reviews only.
    settings.QUORUM_REVIEW_DAILY_LIMIT = 0
    settings.QUORUM_REVIEW_DAILY_MAX_COST_USD = 0.5
    Run.objects.filter(pk=Run.objects.order_by("pk").first().pk).update(cost_usd="0.75")
    monkeypatch.setenv("QUORUM_API_BASE", "http://127.0.0.1:9")
    code, _, err = review(str(path), "--model", "security=openai/gpt-4o-mini")
    assert code == 2 and "QUORUM_REVIEW_DAILY_MAX_COST_USD" in err, err
    assert Review.objects.count() == 26
    code, _, err = review(str(path), "--model", "security=offline/default")
    assert code == 1, err
    assert Review.objects.count() == 27


EX_SQLI_KEY = """diff --git a/lib/users.ex b/lib/users.ex
new file mode 100644
index 0000000..3b18e51
--- /dev/null
+++ b/lib/users.ex
@@ -0,0 +1,5 @@
+@stripe_key "sk_live_51HqLyjWDarjtT1zdp7dcXYZabcdEFGH"
+
+def find(db, id) do
+  Repo.query("select * from users where id = #{id}")
+end
"""


def test_offline_review_of_a_file_nobody_can_read_is_not_approved_and_exits_1(tmp_path):
    """No analyzer reads Elixir (Ruby has semgrep rules since issue 36) and the offline model
    reads no code, so nothing examined the
    file (the secrets scanners found the key, but they look for keys only); the review says
    so and does not approve. (TypeScript, the issue's example, is read by semgrep and oxlint
    now: tests/test_review_languages.py.)"""
    path = tmp_path / "ex.diff"
    path.write_text(EX_SQLI_KEY)
    code, out, err = review(str(path), "--format", "json")
    assert code == 1, err
    data = json.loads(out)
    assert data["review"]["verdict"]["final"] != "approve"
    [entry] = [c for c in data["coverage"] if c["path"] == "lib/users.ex"]
    assert (entry["reason"], entry["reviewed"]) == ("not_examined", False)
    assert "Incomplete review" in data["review"]["summary"]
    assert "Not reviewed: lib/users.ex: checked for secrets only: no analyzer reads Elixir" in err
    assert "Incomplete review: 1 part(s) of the change left unexamined." in err
    review_row = Review.objects.get()
    assert review_row.examined_files == 0 and review_row.total_files == 1


def _branch_and_main_move_on(path):
    import subprocess

    git = ["git", "-C", str(path), "-c", "user.email=t@example.com", "-c", "user.name=Dev"]
    subprocess.run([*git, "checkout", "-qb", "feature"], check=True)
    (path / "calc.py").write_text("def double(x):\n    return x + x\n")
    subprocess.run([*git, "commit", "-qam", "double by addition \x1b[31mred"], check=True)
    subprocess.run([*git, "checkout", "-q", "main"], check=True)
    (path / "later.py").write_text("import os\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "main moves on"], check=True)


@pytest.mark.parametrize("rng", ["main..feature", "main...feature"])
def test_git_range_reviews_the_branch_since_it_left_main_and_lists_its_commits(
        tmp_path, settings, rng):
    repo = git_repo(tmp_path / "repo", {"calc.py": "def double(x):\n    return 2 * x\n"})
    _branch_and_main_move_on(repo)
    settings.QUORUM_REPO_ROOTS = [str(tmp_path)]
    code, out, err = review("--git", str(repo), rng, "--format", "json")
    assert code in (0, 1), err
    assert [f["path"] for f in Review.objects.get().files] == ["calc.py"]  # not later.py
    assert f"Commits in {rng.replace('...', '..')} (1):" in err
    sha = Review.objects.get().source_meta["commits"][0]["short"]
    # the subject's escape character does not reach the terminal
    assert f"  {sha} double by addition  [31mred (Dev)" in err
    assert "\x1b" not in err


def test_git_range_with_no_commits_exits_2(tmp_path, settings):
    repo = git_repo(tmp_path / "repo", {"a.py": "A = 1\n"}, {"a.py": "A = 2\n"})
    settings.QUORUM_REPO_ROOTS = [str(tmp_path)]
    code, _, err = review("--git", str(repo), "main..main~1")
    assert code == 2 and "nothing to review" in err
    assert not Review.objects.exists()


from tests.test_review_diffs import NEW_PY as NEW_PY_FILE  # noqa: E402 - beside its use


def test_a_pasted_new_file_is_analysed_whole_and_its_unused_names_found(monkeypatch):
    import io
    import sys

    class Stdin:
        buffer = io.BytesIO(NEW_PY_FILE.encode())

    monkeypatch.setattr(sys, "stdin", Stdin())
    code, out, err = review("-", "--format", "json")
    assert code in (0, 1), err
    rules = {(r, f["line"]) for f in json.loads(out)["findings"] + json.loads(out)["dropped"]
             for r in (e["rule"] for e in f["evidence"])}
    assert {("F401", 1), ("F401", 2), ("F841", 6)} <= rules
    assert Review.objects.get().files[0]["mode"] == "heavy"


def test_an_incomplete_review_reads_as_written_in_the_markdown_export(tmp_path):
    """The incomplete-review lead of the summary is plain words: the Markdown export (which
    escapes emphasis in untrusted text) showed it as literal asterisks."""
    from markdown_it import MarkdownIt

    path = tmp_path / "ex.diff"
    path.write_text(EX_SQLI_KEY)
    code, out, err = review(str(path), "--format", "markdown")
    assert code == 1, err
    rendered = MarkdownIt("commonmark").render(out)
    assert "Incomplete review: 1 file not examined" in rendered
    assert "\\*" not in out and "**Incomplete" not in rendered


def test_nul_bytes_in_the_files_of_a_change_are_replaced_and_counted():
    """A source that brings the changed files' contents (a git range) has them replaced too,
    a file without contents (None) left as it is, and the note counts both."""
    from reviews_app import services

    inp = services.ReviewInput(kind="git", label="main..x", diff_text="+a\x00\n",
                               contents={"a.py": "b\x00\x00", "gone.py": None})
    services.replace_nul(inp)
    assert inp.diff_text == "+a\ufffd\n" and inp.contents == {"a.py": "b\ufffd\ufffd",
                                                              "gone.py": None}
    [note] = inp.coverage
    assert note["reason"] == "nul_bytes" and note["reviewed"] is True
    assert "The diff and its files held 3 NUL bytes" in note["detail"]
    services.replace_nul(inp)  # prepared twice (the form, then the start): one note
    assert len(inp.coverage) == 1
