"""Reviewer calibration (issue 34): the starter set is well formed, the scoring's figures on
hand-made findings, malformed cases refused by name, ``manage.py calibrate`` end to end on
the offline model over a few cases, and the calibration page's access and content."""

from __future__ import annotations

import json
import shutil
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from agents_app import engine
from agents_app.experiments.stats import wilson_interval
from agents_app.models import Run
from reviews_app import services
from reviews_app.calibration import cases, runner, scoring
from reviews_app.calibration.cases import CaseError, Defect
from reviews_app.calibration.scoring import Outcome, Reported, RoleRun
from reviews_app.models import Finding, Review
from reviews_app.pipeline import diffs
from reviews_app.pipeline.schema import CATEGORIES, KINDS
from tests.review_corpus import GOOD

LANGUAGES = ("python", "javascript", "typescript", "go", "java", "shell", "dockerfile")
STARTER = cases.load("starter")


# --- the starter set ----------------------------------------------------------------------
def test_the_starter_set_covers_the_analyzed_languages_with_clean_cases():
    assert len(STARTER.cases) >= 40 and STARTER.clean >= 10
    languages = {c.language for c in STARTER.cases}
    assert set(LANGUAGES) <= languages
    for lang in LANGUAGES:
        flagged = [c for c in STARTER.cases if c.language == lang and not c.clean]
        assert len(flagged) >= 3, lang
    assert {d.category for c in STARTER.cases for d in c.defects} == set(CATEGORIES)
    readme = (cases.STARTER / "README.md").read_text()
    assert "licence" in readme.lower() and "written for Quorum" in readme


@pytest.mark.parametrize("case", STARTER.cases, ids=[c.name for c in STARTER.cases])
def test_every_starter_case_is_well_formed(case):
    assert case.diff_text.startswith("diff --git "), "made with git diff"
    assert case.description
    prepared = diffs.prepare(case.diff_text)
    assert not [c for c in prepared.coverage if not c.get("reviewed")]
    new_lines = {f["path"]: {ln["new"]: ln["kind"] for h in f["hunks"] for ln in h["lines"]
                             if ln["new"] is not None} for f in prepared.files}
    for d in case.defects:
        assert d.file in new_lines, d
        assert all(n in new_lines[d.file] for n in range(d.start, d.end + 1)), d
        assert any(new_lines[d.file][n] == "add" for n in range(d.start, d.end + 1)), d
        assert d.category in CATEGORIES and d.kind in KINDS and d.what, d
    assert case.clean == (not case.defects)


# --- malformed cases are refused with their name and field -------------------------------
NEW_FILE = ("diff --git a/app/x.py b/app/x.py\nnew file mode 100644\n--- /dev/null\n"
            "+++ b/app/x.py\n@@ -0,0 +1,3 @@\n+import os\n+\n+os.system(name)\n")
CHANGED = ("diff --git a/app/x.py b/app/x.py\nindex 1111111..2222222 100644\n--- a/app/x.py\n"
           "+++ b/app/x.py\n@@ -1,2 +1,3 @@\n import os\n \n+os.system(name)\n")


def jsonl(tmp_path, *rows) -> str:
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return str(path)


def row(**kw):
    base = {"name": "shell-call", "language": "python", "diff": NEW_FILE,
            "defects": [{"file": "app/x.py", "lines": [3, 3], "category": "security"}]}
    return {**base, **kw}


@pytest.mark.parametrize("data, expected", [
    (row(language=""), "case shell-call: language: required"),
    (row(defects=[{"file": "app/x.py", "lines": [3, 9]}]),
     "case shell-call: defects[0].lines: line 4 of app/x.py is not in the diff's new file"),
    (row(defects=[{"file": "app/y.py", "line": 3}]),
     "case shell-call: defects[0].file: app/y.py is not a reviewable file of the diff"),
    (row(defects=[{"file": "app/x.py", "line": 3, "category": "bugs"}]),
     "case shell-call: defects[0].category: one of security, architecture, style"),
    (row(defects=[{"file": "app/x.py", "line": 3, "kind": "typo"}]),
     "case shell-call: defects[0].kind: one of"),
    (row(defects=[{"file": "app/x.py", "lines": [3, 2]}]),
     "case shell-call: defects[0].lines: must be [first, last], positive, in order"),
    (row(diff=CHANGED, defects=[{"file": "app/x.py", "lines": [1, 2]}]),
     "case shell-call: defects[0].lines: no line of the range is added by the change"),
    (row(defects=[]), "case shell-call: defects: none given"),
    (row(clean=True), "case shell-call: defects: a clean case has none"),
    (row(diff="not a diff at all\n"), "case shell-call: diff:"),
    (row(name="../etc"), "case ../etc: name:"),
    ({"name": "both", "language": "go", "diff": NEW_FILE, "files": [], "clean": True},
     "case both: diff: give the change once"),
])
def test_a_malformed_case_is_refused_naming_it_and_the_field(tmp_path, data, expected):
    with pytest.raises(CaseError) as exc:
        cases.load(jsonl(tmp_path, data))
    assert str(exc.value).startswith(expected), str(exc.value)


def test_set_level_problems_are_named(tmp_path):
    with pytest.raises(CaseError, match=r"set.jsonl line 2: not JSON"):
        cases.load(jsonl(tmp_path, row(), "{broken"))
    with pytest.raises(CaseError, match=r"case shell-call: name: given twice"):
        cases.load(jsonl(tmp_path, row(), row()))
    with pytest.raises(CaseError, match=r"no such file or folder"):
        cases.load(tmp_path / "missing")
    (tmp_path / "lonely.json").write_text(json.dumps({"language": "go", "clean": True}))
    with pytest.raises(CaseError, match=r"case lonely: diff: give the change once"):
        cases.load(tmp_path)


def test_a_case_can_be_written_as_files_before_and_after(tmp_path):
    files = [{"path": "lib/calc.py", "before": "def add(a, b):\n    return a + b\n",
              "after": "def add(a, b):\n    return a + b\n\n\ndef run(expr):\n"
                       "    return eval(expr)\n"}]
    got = cases.load(jsonl(tmp_path, {"name": "eval", "language": "python", "files": files,
                                      "defects": [{"file": "lib/calc.py", "line": 6}]}))
    case = got.cases[0]
    assert case.diff_text.startswith("diff --git a/lib/calc.py b/lib/calc.py\n")
    assert case.defects == [Defect("lib/calc.py", 6, 6)]


# --- scoring on hand-made findings ---------------------------------------------------------
def found(key, role, file, line, end=None, category=None, locations=()):
    return Reported.of({"key": key, "reviewer": role, "file": file, "line": line,
                        "end_line": end, "category": category or scoring.LENS[role],
                        "locations": list(locations)})


def outcome(name, defects, findings, examined=("a.py",), roles=("security", "architecture",
                                                                 "style", "checker"),
            model="m", **kw):
    return Outcome(case=name, language="python", defects=defects, run_id=1,
                   status="completed", findings=findings,
                   roles={r: RoleRun(model, frozenset(examined), cost=kw.pop(r, 0.0))
                          for r in roles}, **kw)


def rows_of(card):
    return {r["role"]: r for r in card["rows"]}


SQL = Defect("a.py", 10, 12, "security", "security", "SQL built from input")
LEAK = Defect("a.py", 30, 30, "architecture", "bug", "file never closed")
NAME = Defect("a.py", 40, 40, "style", "style", "misleading name")


def test_matched_missed_extra_and_false_positives_on_clean_diffs():
    card = scoring.scorecard([
        # SQL found (line 13 is within the slack of 2), the leak missed, one extra finding
        outcome("flagged", [SQL, LEAK], [found("SEC-1", "security", "a.py", 13),
                                         found("SEC-2", "security", "a.py", 50)]),
        # a clean diff: one style finding is a false positive
        outcome("clean", [], [found("STY-1", "style", "a.py", 3)]),
    ])
    r = rows_of(card)
    assert (r["security"]["found"], r["security"]["defects"]) == (1, 1)
    assert (r["architecture"]["found"], r["architecture"]["defects"]) == (0, 1)
    assert r["security"]["extra"] == 1 and r["architecture"]["extra"] == 0
    assert r["style"]["fp_per_clean"] == 1.0 and r["security"]["fp_per_clean"] == 0.0
    assert r["security"]["out_of_reach"] == 1  # the leak is another lens's defect
    whole = r["review"]
    assert (whole["found"], whole["defects"], whole["clean_findings"]) == (1, 2, 1)
    assert whole["recall"] == 0.5 and (whole["low"], whole["high"]) == wilson_interval(1, 2)
    assert card["case_results"][0]["defects"][1]["seen"] is True
    assert card["case_results"][0]["defects"][1]["found"] is False


def test_the_slack_the_category_and_a_finding_without_a_line():
    near = outcome("x", [SQL], [found("SEC-1", "security", "a.py", 14)])  # 2 after the end
    far = outcome("x", [SQL], [found("SEC-1", "security", "a.py", 15)])  # 3 after
    other_file = outcome("x", [SQL], [found("SEC-1", "security", "b.py", 10)])
    no_line = outcome("x", [SQL], [found("SEC-1", "security", "a.py", None)])
    wrong_lens = outcome("x", [Defect("a.py", 10, 10)],  # no category: any reviewer
                         [found("STY-1", "style", "a.py", 10)])
    assert [rows_of(scoring.scorecard([o]))["review"]["found"]
            for o in (near, far, other_file, no_line, wrong_lens)] == [1, 0, 0, 0, 1]
    # a category given: a style finding on the SQL's lines does not find it
    style_on_sql = outcome("x", [SQL], [found("STY-1", "style", "a.py", 10)])
    assert rows_of(scoring.scorecard([style_on_sql]))["review"]["found"] == 0


def test_matching_is_one_to_one_but_a_cluster_finds_each_place():
    two = [Defect("a.py", 10, 10, "security"), Defect("a.py", 13, 13, "security")]
    wide = outcome("x", two, [found("SEC-1", "security", "a.py", 10, 14)])
    cluster = outcome("x", two, [found("SEC-1", "security", "a.py", 10, locations=[
        {"file": "a.py", "line": 10}, {"file": "a.py", "line": 13}])])
    assert rows_of(scoring.scorecard([wide]))["security"]["found"] == 1
    assert rows_of(scoring.scorecard([cluster]))["security"]["found"] == 2


def test_merged_duplicates_credit_every_reviewer_and_unique_finds_are_listed():
    arch = Defect("a.py", 30, 30, "architecture", "bug", "leak")
    other = Defect("a.py", 60, 60, "architecture", "bug", "race")
    merged = Reported.of({"key": "ARC-1", "reviewer": "architecture", "file": "a.py",
                          "line": 30, "category": "architecture",
                          "reviewers": ["architecture", "cross-file"]})
    card = scoring.scorecard([outcome("x", [arch, other], [
        merged, found("ARC-2", "architecture", "a.py", 60)])])
    r = rows_of(card)
    assert r["checker"]["found"] == 1 and r["architecture"]["found"] == 2
    assert r["architecture"]["unique"] == ["x: a.py:60 (race)"]
    assert r["checker"]["unique"] == []
    # security cannot reach architecture defects: never a rival, never "unique" against it
    assert r["security"]["defects"] == 0 and r["security"]["recall"] is None


def test_unexamined_files_failed_runs_and_cost_per_true_finding():
    yaml_defect = Defect("deploy.yaml", 3, 3, "security")
    card = scoring.scorecard([
        Outcome(case="mixed", language="python", defects=[SQL, yaml_defect], run_id=1,
                status="completed", findings=[found("SEC-1", "security", "a.py", 10)],
                roles={"security": RoleRun("m", frozenset({"a.py"}), cost=0.02),
                       "architecture": RoleRun("m", frozenset({"a.py"}), cost=0.01),
                       "checker": RoleRun("m", frozenset({"a.py", "deploy.yaml"}))}),
        Outcome(case="broken", language="go", defects=[SQL], run_id=9, status="failed",
                error="the review ended as failed: boom",
                roles={"security": RoleRun("m", frozenset())}),
    ])
    r = rows_of(card)
    assert (r["security"]["found"], r["security"]["defects"]) == (1, 1)
    assert r["security"]["not_examined"] == ["mixed: deploy.yaml:3", "broken: a.py:10-12 "
                                             "(SQL built from input)"]
    assert r["security"]["cost_per_find"] == pytest.approx(0.02)
    assert r["architecture"]["cost_per_find"] is None  # it found nothing
    assert card["failed"] == [{"case": "broken", "run": 9, "status": "failed",
                               "error": "the review ended as failed: boom"}]
    # the checker examined the manifest, but a security defect is out of its reach: the
    # whole review did not examine it either
    assert r["checker"]["out_of_reach"] == 2
    assert r["review"]["not_examined"][0] == "mixed: deploy.yaml:3"
    mixed = card["case_results"][0]["defects"]
    assert mixed[1]["seen"] is False and mixed[1]["not_examined_by"] == ["security"]


def test_recall_interval_is_wilson():
    defects = [Defect("a.py", n, n, "security") for n in (10, 20, 30, 40)]
    hits = [found(f"SEC-{n}", "security", "a.py", n) for n in (10, 20, 30)]
    row = rows_of(scoring.scorecard([outcome("x", defects, hits)]))["security"]
    assert row["recall"] == 0.75
    assert (row["low"], row["high"]) == wilson_interval(3, 4)
    assert round(row["low"], 3) == 0.301 and round(row["high"], 3) == 0.954


def test_triage_precision_per_role_and_model():
    got = scoring.triage_precision([
        (["security"], {"security": "gpt"}, "accepted"),
        (["security", "cross-file"], {"security": "gpt", "checker": "small"}, "rejected"),
        (["security"], {"security": "gpt"}, "accepted"),
        (["style"], {"style": "gpt"}, "pending"),
    ])
    assert [(p["role"], p["model"], p["accepted"], p["rejected"]) for p in got] == [
        ("security", "gpt", 2, 1), ("checker", "small", 0, 1)]
    assert (got[0]["low"], got[0]["high"]) == wilson_interval(2, 3)
    assert scoring.triage_precision([]) == []


# --- the command and the runner, end to end, offline -------------------------------------
FEW = ("py-invoice-totals", "py-clean-slugify", "mixed-worker-manifest")


@pytest.fixture
def few(tmp_path):
    folder = tmp_path / "few"
    folder.mkdir()
    for name in FEW:
        for ext in (".json", ".diff"):
            shutil.copy(cases.STARTER / f"{name}{ext}", folder / f"{name}{ext}")
    return folder


def calibrate(*args):
    out, err = StringIO(), StringIO()
    call_command("calibrate", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db(transaction=True)
def test_the_command_reviews_each_case_as_the_users_review_and_scores_them(alice, bob, few):
    out, err = calibrate("--user", "alice", "--set", str(few), "--json")
    card = json.loads(out)
    assert card["cases"] == card["set_cases"] == 3 and card["scored"] == 3
    assert card["not_started"] == [] and card["failed"] == []
    rows = {r["role"]: r for r in card["rows"]}
    assert rows["security"]["model"] == "offline/default"
    # The Kubernetes manifest's privileged container is found too: since issue 36 Semgrep's
    # rules of our own read manifests (it used to be counted as not examined).
    assert (rows["security"]["found"], rows["security"]["defects"]) == (2, 2)
    assert rows["security"]["not_examined"] == [] == rows["review"]["not_examined"]
    assert (rows["review"]["found"], rows["review"]["defects"], rows["review"]["clean"]) == (
        2, 2, 1)
    assert rows["review"]["fp_per_clean"] == rows["review"]["clean_findings"]
    assert card["precision"] == [] and card["precision_note"] == "no triaged reviews yet"
    # real reviews of Alice's, in her history, run to their end, recognisable by their marker
    runs = list(Run.objects.order_by("id"))
    assert len(runs) == 3 and {r.owner for r in runs} == {alice}
    assert all(r.status == "completed" and r.options["calibration"]["batch"] == card["batch"]
               for r in runs)
    reviews = Review.objects.filter(owner=alice).order_by("run_id")
    assert [r.source_label for r in reviews] == [
        "Calibration few 1/3: mixed-worker-manifest", "Calibration few 2/3: py-clean-slugify",
        "Calibration few 3/3: py-invoice-totals"]
    assert all(r.source_kind == "paste" and r.final_verdict for r in reviews)
    # the reviewers read what a pasted diff shows them, never the case's name
    assert runs[2].state["label"] == "Pasted diff: billing/reports.py"
    assert "[1] mixed-worker-manifest: run" in err
    # the same scorecard read back from the runs; Bob has none
    assert runner.scorecard(alice)["rows"] == card["rows"]
    assert runner.scorecard(bob) is None


@pytest.mark.django_db(transaction=True)
def test_the_printed_table_and_the_triage_precision_of_real_reviews(alice, few):
    inp = services.from_text(GOOD)
    real = engine.run_inline(services.start_review(alice, inp, services.prepare(inp),
                                                   enqueue=False).pk)
    kept = list(Finding.objects.filter(review__run=real, kept=True).order_by("position"))
    Finding.objects.filter(pk=kept[0].pk).update(decision="accepted")
    Finding.objects.filter(pk__in=[f.pk for f in kept[1:]]).update(decision="rejected")
    out, _ = calibrate("--user", "alice", "--set", str(few))
    assert "| security | offline/default | 1.00 (2/2) | 0.34–1.00 |" in out
    assert "Not examined by security" not in out
    # precision from the real review's triage, the calibration runs' findings left out
    Finding.objects.filter(review__run__options__has_key="calibration").update(
        decision="accepted")
    precision = runner.triage_precision(alice)
    assert [(p["role"], p["accepted"], p["rejected"]) for p in precision] == [
        ("security", 1, len(kept) - 1)]
    assert "| security | offline/default | " in out.split("Precision from your triage")[1]


@pytest.mark.django_db
def test_bad_input_exits_2_with_one_line(alice, tmp_path, few):
    def refused(*args) -> str:
        with pytest.raises(CommandError) as exc:
            calibrate(*args)
        assert exc.value.returncode == 2
        assert "\n" not in str(exc.value)
        return str(exc.value)

    assert refused("--user", "nobody") == "No user 'nobody'."
    assert "no such file or folder" in refused("--user", "alice", "--set", str(tmp_path / "x"))
    (few / "py-invoice-totals.json").write_text(json.dumps(
        {"language": "python", "defects": [{"file": "billing/reports.py", "line": 99}]}))
    assert refused("--user", "alice", "--set", str(few)).startswith(
        "case py-invoice-totals: defects[0].lines: line 99")
    (few / "py-invoice-totals.json").write_text(json.dumps(
        {"language": "python", "defects": [{"file": "billing/reports.py",
                                            "lines": [1, 1_000_000_000_000]}]}))
    assert "defects[0].lines" in refused("--user", "alice", "--set", str(few))
    (few / "py-invoice-totals.json").write_text('{"language": "py\\ud800"}')
    assert "unpaired surrogate" in refused("--user", "alice", "--set", str(few))
    (few / "py-invoice-totals.json").write_text("[" * 100_000 + "]" * 100_000)
    assert "nested too deeply" in refused("--user", "alice", "--set", str(few))
    assert "ROLE one of security" in refused("--user", "alice", "--models", "judge=x")
    assert "offline provider has only" in refused("--user", "alice", "--models",
                                                  "style=offline/nope")
    assert not Run.objects.exists()


# --- the page ----------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_the_page_shows_the_owners_latest_calibration_only(client, alice, bob, few):
    url = reverse("review_calibration")
    anonymous = client.get(url)
    assert anonymous.status_code == 302 and anonymous.url.startswith("/accounts/login/")
    client.force_login(alice)
    empty = client.get(url).content.decode()
    assert "No calibration yet" in empty and "No triaged reviews yet" in empty
    calibrate("--user", "alice", "--set", str(few))
    page = client.get(url).content.decode()
    assert "Your latest calibration" in page and "py-invoice-totals" in page
    assert "1.00 (2/2)" in page
    assert url in client.get(reverse("review_list")).content.decode()
    client.force_login(bob)
    other = client.get(url).content.decode()
    assert "No calibration yet" in other and "py-invoice-totals" not in other
