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
    # Three reviewers, their reflections, one synthesis: each call recorded once.
    stages = sorted(ModelCall.objects.values_list("stage", flat=True))
    assert stages.count("review") == 3 and stages.count("synthesize") == 1


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
    assert detail <= reasons
    assert Run.objects.get().status == "completed"


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
