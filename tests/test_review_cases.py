"""The review-quality cases (tests/data/review_cases/) are well formed: each diff parses with
the review's own parser, every file of it is reviewable, and each expected finding (and each
documented negative) points at a line the change adds. What the review finds on them is
measured by tests/benchmarks/bench_review_quality.py, not asserted here."""

from collections import Counter
from pathlib import Path

import pytest

from reviews_app.pipeline import diffs
from tests.benchmarks import review_quality as rq

ROOT = Path(__file__).resolve().parent / "data" / "review_cases"
CASES = rq.load_cases(ROOT)
MAIN_LANGUAGES = ("python", "typescript", "javascript", "go", "shell")


def added_lines(prepared: diffs.Prepared) -> dict[str, set[int]]:
    return {f["path"]: {ln["new"] for h in f["hunks"] for ln in h["lines"]
                        if ln["kind"] == "add"} for f in prepared.files}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_is_well_formed(case):
    assert case.diff_text.startswith("diff --git "), "made with git diff"
    prepared = diffs.prepare(case.diff_text)
    skipped = [c for c in prepared.coverage if not c.get("reviewed")]
    assert not skipped, f"files the review would skip: {skipped}"
    assert len(prepared.files) == prepared.total_files >= 1
    added = added_lines(prepared)
    for item in case.expected + case.negatives:
        assert item["file"] in added, f"{item['file']} is not a file of the diff"
        for line in (item["start"], item["end"]):
            assert line in added[item["file"]], f"{item['file']}:{line} is not an added line"
    if case.clean:
        assert case.expected == [] and case.verdict_not is None
    else:
        # A change whose only findings are minor (a typo, a duplicate YAML key) may still be
        # approved with a note: such a case sets no verdict expectation.
        assert case.expected and case.verdict_not in ("approve", None)
        assert all(e["kind"] != "unspecified" for e in case.expected)
    assert case.description.strip()


def test_expected_findings_are_distinct():
    for case in CASES:
        # Two different problems may sit on one line (an image that is both unpinned and
        # unlimited); the same kind twice on one line may not.
        places = Counter((e["file"], e["start"], e["kind"]) for e in case.expected)
        assert max(places.values(), default=1) == 1, case.name


def test_the_set_covers_the_languages_teams_ship():
    assert len(CASES) >= 24
    per_language = Counter(c.language for c in CASES)
    clean = Counter(c.language for c in CASES if c.clean)
    for lang in MAIN_LANGUAGES:
        assert per_language[lang] >= 4, lang
        assert clean[lang] >= 1, lang
    assert {"dockerfile", "java"} <= set(per_language)


def test_issue_36_languages_and_taint_classes_are_in_the_set():
    per_language = Counter(c.language for c in CASES)
    clean = Counter(c.language for c in CASES if c.clean)
    for lang in ("php", "ruby", "csharp", "kotlin"):
        assert per_language[lang] >= 3 and clean[lang] >= 1, lang
    kinds = {e["kind"] for c in CASES for e in c.expected}
    negative_kinds = {n.get("kind") for c in CASES for n in c.negatives}
    for kind in ("path_traversal", "ssrf", "open_redirect", "xss", "xxe", "ldap_injection",
                 "xpath_injection", "insecure_cookie", "trust_boundary"):
        assert kind in kinds and kind in negative_kinds, kind
