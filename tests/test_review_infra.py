"""Issue 36, offline: Terraform, Kubernetes manifests, GitHub Actions workflows, YAML, SQL and
documentation reviewed by the built-in offline model through the whole pipeline
(``manage.py review``: the real engine, the real analyzers). A public S3 bucket and a workflow
that runs the pull request's title in a shell are found on their lines; a documentation-only
change with nothing wrong is approved, every file counted as examined by the analyzers that
read it."""

from __future__ import annotations

import pytest

from reviews_app.models import Review
from tests import review_corpus_infra as corpus
from tests.review_cli import review

pytestmark = pytest.mark.django_db(transaction=True)



def found(data: dict) -> set[tuple[str, int, str]]:
    # the offline model titles a finding "<rule>: <analyzer message>"
    return {(f["file"], f["line"], f["title"].split(":", 1)[0]) for f in data["findings"]}


def test_a_public_bucket_in_terraform_is_found_on_its_line(tmp_path):
    code, data, err = review(tmp_path, corpus.TERRAFORM_BUCKET.diff)
    assert code == 1, err
    assert data["review"]["verdict"]["final"] == "request_changes"
    assert {("infra/exports.tf", 3, "tf-public-bucket"),
            ("infra/exports.tf", 12, "tf-open-admin-port")} <= found(data)
    # HTTPS open to the world is not an admin port
    assert not [f for f in data["findings"] if f["line"] == 18]
    [entry] = Review.objects.get().coverage
    assert (entry["reason"], entry["reviewed"]) == ("analyzers_only", True)
    assert "semgrep" in entry["analyzers"]


def test_a_workflow_running_the_pull_request_title_in_a_shell_is_found(tmp_path):
    code, data, err = review(tmp_path, corpus.WORKFLOW_INJECTION.diff)
    assert code == 1, err
    assert data["review"]["verdict"]["final"] == "request_changes"
    path = ".github/workflows/greet.yml"
    got = found(data)
    assert (path, 17, "template-injection") in got, got
    assert (path, 12, "gha-pr-target-head-checkout") in got
    assert (path, 14, "unpinned-uses") in got
    assert (path, 5, "excessive-permissions") in got
    injection = next(f for f in data["findings"] if f["line"] == 17)
    assert injection["severity"] in ("high", "critical")
    [entry] = Review.objects.get().coverage
    assert {"zizmor", "yamllint", "semgrep"} <= set(entry["analyzers"])


def test_a_documentation_only_change_with_no_problem_is_approved(tmp_path):
    code, data, err = review(tmp_path, corpus.DOCS_CLEAN.diff)
    assert code == 0, (err, data["findings"])
    assert data["review"]["verdict"]["final"] == "approve"
    coverage = {c["path"]: c for c in Review.objects.get().coverage}
    assert set(coverage) == {"docs/deploying.md", "docs/examples/worker.yaml", "docs/notes.rst"}
    assert all((c["reason"], c["reviewed"]) == ("analyzers_only", True)
               for c in coverage.values()), coverage
    assert {"codespell", "pymarkdown"} <= set(coverage["docs/deploying.md"]["analyzers"])
    assert "yamllint" in coverage["docs/examples/worker.yaml"]["analyzers"]
    assert "codespell" in coverage["docs/notes.rst"]["analyzers"]
    assert "pymarkdown" not in coverage["docs/notes.rst"]["analyzers"]


def test_a_misspelling_is_a_low_finding_and_still_approved(tmp_path):
    code, data, err = review(tmp_path, corpus.DOCS_TYPO.diff)
    assert ("docs/guide.md", 3, "misspelling") in found(data)
    assert data["review"]["verdict"]["final"] == "approve"
    assert code == 0, err


@pytest.mark.parametrize("case", [c for c in corpus.CASES if not c.clean],
                         ids=lambda c: c.name)
def test_each_case_is_found_on_its_lines(tmp_path, case):
    code, data, err = review(tmp_path, case.diff)
    expected = {(f, n, rule) for f, n, rule, _kind, _sev in case.expected}
    assert expected <= found(data), (case.name, sorted(found(data)))
    negatives = {(f, n) for f, n, *_ in case.negatives}
    assert not {(f["file"], f["line"]) for f in data["findings"]} & negatives


@pytest.mark.parametrize("case", [c for c in corpus.CASES if c.clean], ids=lambda c: c.name)
def test_each_clean_case_is_approved_with_every_file_examined(tmp_path, case):
    code, data, err = review(tmp_path, case.diff)
    assert code == 0, (case.name, err, data["findings"])
    assert data["review"]["verdict"]["final"] == "approve"
    assert [f for f in data["findings"] if f["severity"] not in ("info", "low")] == []
    assert all(c["reviewed"] for c in Review.objects.get().coverage)


def test_the_cases_are_written_as_benchmark_case_folders(tmp_path):
    from tests.benchmarks import review_quality as rq

    corpus.write_cases(tmp_path)
    cases = rq.load_cases(tmp_path)
    assert [c.name for c in cases] == sorted(c.name for c in corpus.CASES)
    assert sum(c.clean for c in cases) == sum(c.clean for c in corpus.CASES)
