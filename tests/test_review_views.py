"""Review pages: access for owner / another user / anonymous, the bad-input corpus through
the form, the daily limit, triage, the verdict, exports and history filters.

Reviews that must reach the triage gate run through the real engine with the offline model
(ruff and bandit included); that uses threads, hence transactional tests there."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.urls import reverse
from markdown_it import MarkdownIt

from agents_app import engine
from agents_app.models import Run
from reviews_app import services
from reviews_app.models import Finding, Review
from reviews_app.triage import service as triage
from tests.review_corpus import CASES, ELIXIR, GOOD, JS, git_repo


def start(user, text=GOOD, **kw) -> Run:
    inp = services.from_text(text)
    return services.start_review(user, inp, services.prepare(inp), enqueue=False, **kw)


@pytest.fixture
def triage_run(transactional_db, alice):
    run = engine.run_inline(start(alice).pk)
    assert run.status == "awaiting_triage", run.error
    return run


def urls(run, key="SEC-1"):
    pk = run.pk
    return {
        "detail": ("get", reverse("review_detail", args=[pk]), {}),
        "finding": ("post", reverse("finding_decision", args=[pk, key]),
                    {"decision": "accepted"}),
        "accept_all": ("post", reverse("accept_all", args=[pk]), {"severity": "high"}),
        "verdict": ("post", reverse("verdict_decision", args=[pk]),
                    {"action": "accept", "seq": run.stage_seq}),
        "export": ("get", reverse("export_review", args=[pk]), {"format": "json"}),
    }


# --- access ------------------------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize(("name", "method"), [("review_list", "get"), ("start_review", "post")])
def test_anonymous_is_sent_to_sign_in_from_list_and_start(client, name, method):
    response = getattr(client, method)(reverse(name), {"source": "paste", "diff": GOOD})
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert not Review.objects.exists() and not Run.objects.exists()


@pytest.mark.parametrize("view", ["detail", "finding", "accept_all", "verdict", "export"])
def test_anonymous_cannot_reach_a_review(client, triage_run, view):
    method, url, data = urls(triage_run)[view]
    response = getattr(client, method)(url, data)
    assert response.status_code == 302 and reverse("login") in response["Location"]
    assert not Finding.objects.exclude(decision="pending").exists()
    assert Run.objects.get(pk=triage_run.pk).status == "awaiting_triage"


@pytest.mark.parametrize("view", ["detail", "finding", "accept_all", "verdict", "export"])
def test_another_user_gets_404_and_changes_nothing(bob_client, triage_run, view):
    method, url, data = urls(triage_run)[view]
    response = getattr(bob_client, method)(url, data)
    assert response.status_code == 404
    assert not Finding.objects.exclude(decision="pending").exists()
    assert Run.objects.get(pk=triage_run.pk).status == "awaiting_triage"


def test_another_users_reviews_are_not_listed(bob_client, triage_run):
    response = bob_client.get(reverse("review_list"))
    assert response.status_code == 200
    assert reverse("review_detail", args=[triage_run.pk]) not in response.content.decode()
    assert b"No reviews yet" in response.content


def test_plain_run_page_redirects_a_review_to_its_own_page(alice_client, triage_run):
    response = alice_client.get(reverse("run_detail", args=[triage_run.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("review_detail", args=[triage_run.pk])


# --- the review page ---------------------------------------------------------------------------
def test_owner_sees_findings_anchored_in_a_highlighted_diff(alice_client, triage_run):
    response = alice_client.get(reverse("review_detail", args=[triage_run.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    review = Review.objects.get(run=triage_run)
    kept = list(review.findings.filter(kept=True))
    assert kept, "the offline reviewers should find the shell call and eval"
    assert {f.rules[0][:2] for f in kept} & {"S6", "B6", "S3", "B3"}
    for f in kept:
        assert f'id="finding-{f.key}"' in html and f'href="#finding-{f.key}"' in html
    assert 'id="f0-L5"' in html  # line 5 of the new file is a diff row with an anchor
    assert 'class="pg-' in html  # Pygments token classes
    assert "analyzer-based" in html
    assert "Accept all" in html and 'name="seq"' in html


def test_accept_and_reject_findings_with_a_comment_and_undo(alice_client, alice, triage_run):
    review = Review.objects.get(run=triage_run)
    first, second = review.findings.filter(kept=True)[:2]
    url = reverse("finding_decision", args=[triage_run.pk, first.key])
    response = alice_client.post(url, {"decision": "accepted", "comment": "good catch"},
                                 HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert f'id="finding-{first.key}"' in html and "Accepted" in html and "good catch" in html
    assert 'id="triage-summary" hx-swap-oob="true"' in html
    first.refresh_from_db()
    assert (first.decision, first.comment, first.decided_by) == ("accepted", "good catch", alice)
    alice_client.post(reverse("finding_decision", args=[triage_run.pk, second.key]),
                      {"decision": "rejected"})
    second.refresh_from_db()
    assert second.decision == "rejected" and second.decided_at is not None
    alice_client.post(url, {"decision": "pending"})
    first.refresh_from_db()
    assert first.decision == "pending" and first.decided_by is None


@pytest.mark.parametrize("data", [{}, {"decision": "maybe"}, {"decision": "accepted",
                                                               "comment": "x" * 5000}])
def test_bad_finding_decisions_are_refused_and_change_nothing(alice_client, triage_run, data):
    review = Review.objects.get(run=triage_run)
    f = review.findings.filter(kept=True).first()
    response = alice_client.post(reverse("finding_decision", args=[triage_run.pk, f.key]), data,
                                 HTTP_HX_REQUEST="true")
    assert response.status_code == 400 and b"could not be read" in response.content
    f.refresh_from_db()
    assert f.decision == "pending"


def test_unknown_or_dropped_finding_is_404(alice_client, triage_run):
    url = reverse("finding_decision", args=[triage_run.pk, "NOPE-1"])
    assert alice_client.post(url, {"decision": "accepted"}).status_code == 404


def test_accept_all_of_a_severity(alice_client, triage_run):
    review = Review.objects.get(run=triage_run)
    sev = review.findings.filter(kept=True).first().severity
    n = review.findings.filter(kept=True, severity=sev).count()
    response = alice_client.post(reverse("accept_all", args=[triage_run.pk]), {"severity": sev},
                                 HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and f"Accepted {n} {sev}".encode() in response.content
    assert review.findings.filter(kept=True, severity=sev, decision="accepted").count() == n
    others = review.findings.filter(kept=True).exclude(severity=sev)
    assert not others.exclude(decision="pending").exists()
    bad = alice_client.post(reverse("accept_all", args=[triage_run.pk]), {"severity": "huge"},
                            HTTP_HX_REQUEST="true")
    assert bad.status_code == 400


def test_verdict_override_needs_a_reason_then_completes(alice_client, alice, triage_run):
    review = Review.objects.get(run=triage_run)
    triage.settle_rest(review, "rejected", alice)  # a verdict is final only once all is triaged
    url = reverse("verdict_decision", args=[triage_run.pk])
    other = "approve" if review.proposed_verdict != "approve" else "needs_discussion"
    response = alice_client.post(url, {"action": "override", "verdict": other, "reason": "",
                                       "seq": triage_run.stage_seq}, HTTP_HX_REQUEST="true")
    assert response.status_code == 400 and b"Say why" in response.content
    assert Run.objects.get(pk=triage_run.pk).status == "awaiting_triage"
    response = alice_client.post(url, {"action": "override", "verdict": other,
                                       "reason": "Known false positive in tests",
                                       "seq": triage_run.stage_seq}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    review.refresh_from_db()
    assert review.final_verdict == other and review.verdict_decided_by == alice
    assert review.verdict_reason == "Known false positive in tests"
    assert b"overridden by alice" in response.content
    # A second decision on the same gate is stale.
    again = alice_client.post(url, {"action": "accept", "seq": triage_run.stage_seq},
                              HTTP_HX_REQUEST="true")
    assert again.status_code == 409


def test_exports_in_every_format_and_scope(alice_client, triage_run):
    review = Review.objects.get(run=triage_run)
    accepted = review.findings.filter(kept=True).first()
    accepted.decision = "accepted"
    accepted.save()
    url = reverse("export_review", args=[triage_run.pk])
    js = alice_client.get(url, {"format": "json", "scope": "all"})
    assert js.status_code == 200 and js["Content-Type"].startswith("application/json")
    assert f'review-{triage_run.pk}.json' in js["Content-Disposition"]
    data = json.loads(js.content)
    assert len(data["findings"]) == review.findings.filter(kept=True).count()
    only = json.loads(alice_client.get(url, {"format": "json", "scope": "accepted"}).content)
    assert [f["key"] for f in only["findings"]] == [accepted.key]
    sarif = json.loads(alice_client.get(url, {"format": "sarif"}).content)
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["results"]
    md = alice_client.get(url, {"format": "markdown"})
    assert md["Content-Type"].startswith("text/markdown")
    assert accepted.key in MarkdownIt("commonmark").render(md.content.decode())
    assert alice_client.get(url, {"format": "exe"}).status_code == 400


def test_exports_agree_on_findings_verdict_and_rules(alice_client, triage_run):
    import jsonschema

    from reviews_app import __version__
    from tests.test_review_export import SARIF_SCHEMA_PATH, assert_valid_sarif, rule_of

    url = reverse("export_review", args=[triage_run.pk])
    data = json.loads(alice_client.get(url, {"format": "json"}).content)
    sarif = json.loads(alice_client.get(url, {"format": "sarif"}).content)
    md = alice_client.get(url, {"format": "markdown"}).content.decode()
    assert_valid_sarif(jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA_PATH.read_text())),
                       sarif)
    run = sarif["runs"][0]
    # The same findings in every format, in the same order.
    keys = [f["key"] for f in data["findings"]]
    assert keys and keys == [r["properties"]["key"] for r in run["results"]]
    rendered = MarkdownIt("commonmark").render(md)
    assert keys == [h.split(" · ")[0] for h in re.findall(r"<h4>(.*?)</h4>", rendered)]
    assert run["properties"]["droppedFindings"] == len(data["dropped"])
    for dropped in data["dropped"]:
        assert f"<li>{dropped['key']} · " in rendered
    # The same verdict.
    assert run["properties"]["verdict"] == data["review"]["verdict"]
    assert data["review"]["verdict"]["proposed"] == "request_changes"
    assert "<strong>Proposed verdict:</strong> Request changes" in rendered
    assert data["review"]["tool_version"] == run["tool"]["driver"]["version"] == __version__
    # Analyzer findings carry the analyzer's rule, reported by that analyzer in this run.
    tools = {"bandit", "ruff", "bandit+ruff"}
    for finding, result in zip(data["findings"], run["results"], strict=True):
        assert finding["evidence"], finding
        first = finding["evidence"][0]
        assert first["tool"] in tools and first["url"].startswith("https://")
        assert result["ruleId"] == first["rule"] == rule_of(sarif, result)["id"]
        assert result["rule"]["toolComponent"]["name"] == first["tool"].split("+")[0]
        assert result["properties"]["category"] == finding["category"]


# --- starting reviews: the form ------------------------------------------------------------------
@pytest.mark.django_db
def test_the_form_starts_a_review_and_redirects(alice_client):
    response = alice_client.post(reverse("start_review"), {"source": "paste", "diff": GOOD})
    review = Review.objects.get()
    assert response.status_code == 302 and response["Location"] == review.get_absolute_url()
    assert review.run.pattern == "code_review" and review.run.status == "queued"
    assert review.source_label == "Pasted diff: app/users.py" == review.run.task
    assert review.files[0]["path"] == "app/users.py" and "content" not in review.files[0]
    assert set(review.run.models_used) == {"security", "architecture", "style", "checker",
                                            "verifier", "synthesizer"}


@pytest.mark.django_db
def test_htmx_start_redirects_on_the_client(alice_client):
    response = alice_client.post(reverse("start_review"), {"source": "paste", "diff": GOOD},
                                 HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert response["HX-Redirect"] == Review.objects.get().get_absolute_url()


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "data", "expect"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("how", ["paste", "upload"])
def test_bad_input_corpus_through_the_form(alice_client, name, data, expect, how):
    if how == "paste":
        post = {"source": "paste", "diff": data.decode("utf-8", "replace")}
    else:
        post = {"source": "upload", "upload": SimpleUploadedFile("change.diff", data)}
    response = alice_client.post(reverse("start_review"), post)
    kind, detail = expect
    if kind == "error":
        assert response.status_code == 400
        html = response.content.decode()
        assert 'role="alert"' in html and detail in html
        assert not Review.objects.exists() and not Run.objects.exists()
        return
    assert response.status_code == 302, response.content.decode()[:2000]
    review = Review.objects.get()
    reasons = {c["reason"] for c in review.coverage}
    if how == "paste":
        reasons.add("not_utf8")  # a paste is text already; the upload is what can be broken
    assert detail <= reasons
    page = alice_client.get(review.get_absolute_url())
    assert page.status_code == 200
    assert b"<img src=x" not in page.content and b"<script>alert" not in page.content


@pytest.mark.django_db
def test_html_file_names_are_shown_escaped(alice_client):
    from tests.review_corpus import EVIL_NAMES

    alice_client.post(reverse("start_review"), {"source": "paste", "diff": EVIL_NAMES})
    review = Review.objects.get()
    html = alice_client.get(review.get_absolute_url()).content.decode()
    assert "&lt;img src=x onerror=alert(1)&gt;.py" in html
    assert "../../etc/passwd" in html  # listed in the coverage, not reviewed
    assert [f["path"] for f in review.files] == ["<img src=x onerror=alert(1)>.py"]


@pytest.mark.django_db
@override_settings(QUORUM_REVIEW_MAX_UPLOAD_BYTES=1_000_000)
def test_an_upload_over_the_size_limit_is_refused(alice_client):
    big = SimpleUploadedFile("huge.patch", b"+" * 1_500_000)
    response = alice_client.post(reverse("start_review"), {"source": "upload", "upload": big})
    assert response.status_code == 400 and b"the limit is 1.0 MB" in response.content
    assert not Review.objects.exists()


@pytest.mark.django_db
def test_a_50_mb_upload_is_refused_with_a_message(alice_client):
    big = SimpleUploadedFile("huge.diff", GOOD.encode() * (50_000_000 // len(GOOD)))
    response = alice_client.post(reverse("start_review"), {"source": "upload", "upload": big})
    assert response.status_code == 400 and b"the limit is 10.0 MB" in response.content
    assert not Review.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("post", "message"), [
    ({"source": "upload"}, "Choose a .diff or .patch file"),
    ({"source": "upload", "upload": SimpleUploadedFile("notes.exe", GOOD.encode())},
     "Upload a .diff or .patch file"),
    ({"source": "paste", "diff": ""}, "Paste a diff"),
    ({"source": "git", "repo": "", "range": ""}, "Give the repository path"),
    ({"source": "git", "repo": "/etc", "range": "a..b"}, "QUORUM_REPO_ROOTS"),
    ({"source": "github", "pr_url": ""}, "Give the URL"),
    ({"source": "github", "pr_url": "https://example.com/x"}, "pull request URL like"),
    ({"source": "nope", "diff": GOOD}, "Select a valid choice"),
    ({"source": "paste", "diff": GOOD, "min_confidence": "2"}, "less than or equal to 1"),
    ({"source": "paste", "diff": GOOD, "model_style": "bad model name!"}, ""),
])
def test_bad_form_fields_get_clear_messages(alice_client, post, message):
    response = alice_client.post(reverse("start_review"), post)
    assert response.status_code == 400
    assert 'role="alert"' in response.content.decode() and message in response.content.decode()
    assert not Review.objects.exists() and not Run.objects.exists()


@pytest.mark.django_db
def test_github_without_a_token_says_so(alice_client, settings):
    settings.GITHUB_TOKEN = ""
    response = alice_client.post(reverse("start_review"), {
        "source": "github", "pr_url": "https://github.com/o/r/pull/1"})
    assert response.status_code == 400 and b"GITHUB_TOKEN" in response.content
    assert not Review.objects.exists()


@pytest.mark.django_db
def test_github_pull_request_through_a_fake_api(alice_client, settings):
    from tests.fake_hosts import FakeGitHub

    with FakeGitHub() as gh:
        gh.add_pr("acme", "shop", 7, title="Add users", files={"app/users.py": GOOD},
                  diff=GOOD)
        settings.GITHUB_TOKEN = gh.require_token = "t0ken-for-tests"
        settings.QUORUM_GITHUB_API_URL = gh.url
        response = alice_client.post(reverse("start_review"), {
            "source": "github", "pr_url": "https://github.com/acme/shop/pull/7"})
    assert response.status_code == 302
    review = Review.objects.get()
    assert review.source_kind == "github" and "Add users" in review.source_label
    assert review.source_meta["number"] == 7
    assert review.run.state["files"][0]["content"] is not None


@pytest.mark.django_db
def test_git_range_under_the_configured_root(alice_client, settings, tmp_path):
    repo = git_repo(tmp_path / "repo", {"a.py": "x = 1\n"},
                    {"a.py": "x = 1\ny = eval(input())\n"})
    settings.QUORUM_REPO_ROOTS = [str(tmp_path)]
    response = alice_client.post(reverse("start_review"), {
        "source": "git", "repo": str(repo), "range": "main~1..main"})
    assert response.status_code == 302, response.content.decode()[:1500]
    review = Review.objects.get()
    assert review.source_kind == "git" and review.files[0]["mode"] == "heavy"
    settings.QUORUM_REPO_ROOTS = [str(tmp_path / "elsewhere")]
    refused = alice_client.post(reverse("start_review"), {
        "source": "git", "repo": str(repo), "range": "main~1..main"})
    assert refused.status_code == 400 and Review.objects.count() == 1


# --- daily limit and history ---------------------------------------------------------------------
@pytest.mark.django_db
def test_opt_in_daily_count_refuses_new_reviews_and_says_how_to_raise_it(alice_client, alice,
                                                                         settings):
    settings.QUORUM_REVIEW_DAILY_LIMIT = 2
    start(alice)
    start(alice, JS)
    page = alice_client.get(reverse("review_list")).content.decode()
    assert "Today: 2 of 2 reviews" in page and "daily limit is reached" in page
    response = alice_client.post(reverse("start_review"), {"source": "paste", "diff": GOOD})
    assert response.status_code == 400
    text = response.content.decode()
    assert "daily limit of 2 reviews is reached" in text
    assert "raise QUORUM_REVIEW_DAILY_LIMIT (0 turns this count limit off)" in text
    assert Review.objects.count() == 2
    dash = alice_client.get(reverse("dashboard")).content.decode()
    assert "2 of 2 reviews today" in dash


@pytest.mark.django_db
def test_many_offline_reviews_a_day_are_not_refused_by_default(alice_client, alice):
    # The count limit is opt-in: offline and CI use costs nothing and is never stopped.
    for _ in range(30):
        start(alice)
    assert services.daily_usage()["limit"] is None
    page = alice_client.get(reverse("review_list")).content.decode()
    assert "Today: 30 reviews" in page and "limit is reached" not in page
    dash = alice_client.get(reverse("dashboard")).content.decode()
    assert "30 reviews today, $0.0000 spent of the $20.00 daily cap." in dash
    assert "Start review</button>" in page and "disabled>Start review" not in page
    response = alice_client.post(reverse("start_review"), {"source": "paste", "diff": GOOD})
    assert response.status_code == 302, response.content.decode()[:1000]
    assert Review.objects.count() == 31


@pytest.mark.django_db
def test_daily_cost_cap_refuses_priced_reviews_but_not_offline_ones(alice_client, alice,
                                                                   settings, monkeypatch):
    monkeypatch.setenv("QUORUM_API_BASE", "http://127.0.0.1:9")  # the priced model is routable
    settings.QUORUM_REVIEW_DAILY_MAX_COST_USD = 1.0
    Run.objects.filter(pk=start(alice).pk).update(cost_usd="1.25")
    page = alice_client.get(reverse("review_list")).content.decode()
    assert "$1.25 spent of the $1.00 daily cap" in page and "cost cap is reached" in page
    priced = {"source": "paste", "diff": GOOD, "model_security": "openai/gpt-4o-mini"}
    response = alice_client.post(reverse("start_review"), priced)
    assert response.status_code == 400
    text = response.content.decode()
    assert "$1.25 today" in text and "raise QUORUM_REVIEW_DAILY_MAX_COST_USD" in text
    assert Review.objects.count() == 1
    with pytest.raises(services.DailyLimitReached):
        start(alice, models={"style": "openai/gpt-4o-mini"})
    # The offline model costs nothing: it still starts, from the form and from the service.
    response = alice_client.post(reverse("start_review"), {"source": "paste", "diff": GOOD})
    assert response.status_code == 302, response.content.decode()[:1000]
    start(alice)
    assert Review.objects.count() == 3
    # Under the cap, priced reviews start again.
    settings.QUORUM_REVIEW_DAILY_MAX_COST_USD = 5.0
    assert alice_client.post(reverse("start_review"), priced).status_code == 302


@pytest.mark.django_db
def test_history_filters(alice_client, alice):
    a = start(alice)
    b = start(alice, JS)
    Review.objects.filter(run=a).update(proposed_verdict="request_changes",
                                        source_label="users change")
    Review.objects.filter(run=b).update(proposed_verdict="approve", final_verdict="approve",
                                        source_label="js tweak")
    url = reverse("review_list")
    page = alice_client.get(url, {"verdict": "approve"}).content.decode()
    assert "js tweak" in page and "users change" not in page
    page = alice_client.get(url, {"q": "users"}).content.decode()
    assert "users change" in page and "js tweak" not in page
    page = alice_client.get(url, {"source": "github"}).content.decode()
    assert "No review matches" in page
    partial = alice_client.get(url, {"status": "queued"}, HTTP_HX_REQUEST="true",
                               HTTP_HX_TARGET="history")
    assert partial.status_code == 200 and b"<html" not in partial.content
    bad = alice_client.get(url, {"verdict": "<script>", "before": "x"})
    assert bad.status_code == 200 and b"were not understood" in bad.content


def big_diff(files=40, lines=100) -> str:
    body = "".join(f"+line {j}\n" for j in range(lines))
    return "".join(f"diff --git a/docs/p{i}.txt b/docs/p{i}.txt\nnew file mode 100644\n"
                   f"--- /dev/null\n+++ b/docs/p{i}.txt\n@@ -0,0 +1,{lines} @@\n{body}"
                   for i in range(files))


@pytest.mark.django_db
def test_a_large_review_loads_file_diffs_on_demand(alice_client, alice, bob):
    from django.test import Client

    run = start(alice, big_diff())
    page = alice_client.get(reverse("review_detail", args=[run.pk])).content.decode()
    url = reverse("review_file", args=[run.pk, 3])
    assert f'hx-get="{url}"' in page and "Loading the diff" in page
    assert "line 99" not in page  # rows are not in the page itself
    part = alice_client.get(url, HTTP_HX_REQUEST="true")
    assert part.status_code == 200 and b'<table class="diff-code">' in part.content
    assert b"line 99" in part.content and b"<html" not in part.content
    assert alice_client.get(reverse("review_file", args=[run.pk, 40])).status_code == 404
    other = Client()
    other.force_login(bob)
    assert other.get(url).status_code == 404
    anon = Client().get(url)
    assert anon.status_code == 302 and reverse("login") in anon["Location"]


# --- what the page says was reviewed -------------------------------------------------------------
@pytest.mark.django_db
def test_the_page_lists_the_commits_of_a_git_range(client, alice, bob, settings, tmp_path):
    repo = git_repo(tmp_path / "repo", {"a.py": "x = 1\n"}, {"a.py": "x = 2\n"},
                    {"b.py": "y = 1\n"})
    settings.QUORUM_REPO_ROOTS = [str(tmp_path)]
    client.force_login(alice)
    response = client.post(reverse("start_review"), {
        "source": "git", "repo": str(repo), "range": "main~2...main"})
    assert response.status_code == 302, response.content.decode()[:1500]
    review = Review.objects.get()
    meta = review.source_meta
    assert [c["subject"] for c in meta["commits"]] == ["version 2", "version 3"]
    page = client.get(review.get_absolute_url()).content.decode()
    assert 'id="commits-panel"' in page
    assert "2 in main~2..main" in page
    for c in meta["commits"]:
        assert f'<code title="{c["sha"]}">{c["short"]}</code> {c["subject"]}' in page
    # only the owner sees them
    client.force_login(bob)
    assert client.get(review.get_absolute_url()).status_code == 404
    client.logout()
    anonymous = client.get(review.get_absolute_url())
    assert anonymous.status_code == 302 and reverse("login") in anonymous["Location"]


@pytest.mark.django_db
def test_commit_subjects_and_authors_are_escaped(alice_client, alice):
    inp = services.from_text(GOOD)
    inp.meta = {"range": "main..x", "merge_base": "0" * 40, "commits_total": 1,
                "commits": [{"sha": "1" * 40, "short": "1111111",
                             "subject": "<script>alert(1)</script>", "author": "<b>eve</b>"}]}
    run = services.start_review(alice, inp, services.prepare(inp), enqueue=False)
    page = alice_client.get(reverse("review_detail", args=[run.pk])).content.decode()
    assert "<script>alert(1)</script>" not in page and "<b>eve</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_file_nobody_examined_is_shown_as_not_reviewed(transactional_db, alice,
                                                          alice_client):
    run = engine.run_inline(start(alice, ELIXIR).pk)
    assert run.status == "awaiting_triage", run.error
    review = Review.objects.get(run=run)
    assert review.proposed_verdict != "approve"
    page = alice_client.get(review.get_absolute_url()).content.decode()
    assert "<dd>0 reviewed of 1</dd>" in page
    assert "0 of 1 file reviewed." in page
    assert "Incomplete review: 1 part of the change was left unexamined" in page
    assert "Not reviewed (1)" in page
    assert ('<span class="reason" title="not_examined">not examined by any analyzer or model'
            '</span>') in page
    assert "Reviewed with limits" not in page  # no longer claimed as "reviewed by the models"


def test_the_coverage_panel_updates_live_when_the_review_is_synthesized(transactional_db,
                                                                         alice):
    from agents_app.patterns.base import Event
    from reviews_app.views import render_live_update

    run = engine.run_inline(start(alice, ELIXIR).pk)
    html = render_live_update(run, [Event("review_synthesized", "ready")], set())
    assert 'id="coverage-panel" hx-swap-oob="true"' in html
    assert "not examined by any analyzer or model" in html


# --- a style fix that keeps an injection is folded, and says so everywhere -----------------------
def test_a_folded_style_finding_keeps_its_reason_on_the_page_and_in_exports(alice_client,
                                                                              triage_run):
    """GOOD builds a shell command with % (bandit B602): ruff's UP031 on that line would
    only swap % for format specifiers. It is not offered as a finding to accept; the page's
    dropped findings and every export say where it went and why."""
    review = Review.objects.get(run=triage_run)
    [nit] = [f for f in review.findings.all() if "UP031" in f.rules]
    [shell] = [f for f in review.findings.all() if "B602" in f.rules]
    assert not nit.kept and shell.kept
    assert nit.drop_reason.startswith(f"folded into {shell.key} \u201c")
    page = alice_client.get(reverse("review_detail", args=[triage_run.pk])).content.decode()
    dropped = page[page.index('class="dropped"'):]
    dropped = dropped[:dropped.index("</details>")]
    assert nit.key in dropped and f"folded into {shell.key}" in dropped
    card = page[page.index(f'id="finding-{shell.key}"'):]
    assert "Took in a style finding" in card[:card.index("</li>")]
    url = reverse("export_review", args=[triage_run.pk])
    md = alice_client.get(url, {"format": "markdown"}).content.decode()
    assert f"folded into {shell.key}" in md[md.index("## Dropped findings"):]
    data = json.loads(alice_client.get(url, {"format": "json"}).content)
    [out] = [d for d in data["dropped"] if d["key"] == nit.key]
    assert out["drop_reason"] == nit.drop_reason


def test_the_markdown_export_names_the_analyzers_the_review_ran(transactional_db, alice,
                                                                  alice_client):
    """JavaScript alone: Semgrep, oxlint and the secrets scanners ran, ruff and bandit did
    not (the analysis record says so). The export names them, and not a fixed pair."""
    run = engine.run_inline(start(alice, JS).pk)
    ran = run.state["analysis"]["tools"]
    assert {"semgrep", "oxlint"} <= set(ran) and not {"ruff", "bandit"} & set(ran)
    md = alice_client.get(reverse("export_review", args=[run.pk]),
                          {"format": "markdown"}).content.decode()
    [line] = [ln for ln in md.splitlines() if ln.startswith("- **Analyzers that ran:**")]
    assert f"semgrep {ran['semgrep']} (1 finding)" in line
    assert f"oxlint {ran['oxlint']}" in line and "detect-secrets" in line
    assert "secret key formats" in line
    assert "ruff" not in md and "bandit" not in md
    data = json.loads(alice_client.get(reverse("export_review", args=[run.pk]),
                                       {"format": "json"}).content)
    assert {a["name"] for a in data["review"]["analyzers"]} >= {"semgrep", "oxlint"}


# --- the diff is the main view: files, findings threaded on their lines, triage there ---------
def section(html: str, element_id: str) -> str:
    start = html.index(f'id="{element_id}"')
    return html[start:html.index("</section>", start)]


def thread_of(html: str, key: str) -> str:
    start = html.index(f'id="thread-{key}"')
    return html[start:html.index("</form>", start)]


def test_the_diff_comes_first_with_a_file_list_and_findings_threaded_on_their_lines(
        alice_client, triage_run):
    run = triage_run
    review = Review.objects.get(run=run)
    html = alice_client.get(reverse("review_detail", args=[run.pk])).content.decode()
    # The diff is the main view: above the cards, with the verdict beside it.
    assert html.index('id="triage-bar"') < html.index('id="diff-panel"') \
        < html.index('id="findings-panel"') < html.index('id="history-panel"')
    side = html[html.index('<aside class="side-col"'):]
    assert side.index('id="verdict-panel"') < side.index('id="reviewers-panel"')
    # A file list with what each file holds.
    files = html[html.index('id="file-list"'):html.index("</nav>", html.index('id="file-list"'))]
    kept = list(review.findings.filter(kept=True))
    assert 'href="#file-0"' in files and "app/users.py" in files and "+6" in files
    in_users = [f for f in kept if f.file == "app/users.py"]
    assert f"{len(in_users)} finding" in files
    # Every kept finding once on the diff, right under its line, with accept and reject there.
    diff = section(html, "diff-panel")
    for f in kept:
        assert diff.count(f'id="thread-{f.key}"') == 1, f.key
        row = diff.index(f'id="f{0 if f.file == "app/users.py" else 1}-L{f.line}"')
        next_row = diff.index("<tr", row + 1)
        assert diff.index(f'id="thread-{f.key}"') > next_row
        assert diff[next_row:next_row + 40].startswith('<tr class="marker thread-row"'), f.key
        thread = thread_of(diff, f.key)
        url = reverse("finding_decision", args=[run.pk, f.key])
        assert f'hx-post="{url}"' in thread and f'hx-target="#thread-{f.key}"' in thread
        assert 'name="seen" value="pending"' in thread and 'name="view" value="diff"' in thread
        assert 'value="accepted" aria-keyshortcuts="a"' in thread
        assert 'value="rejected" aria-keyshortcuts="r"' in thread
        assert 'data-finding="' in thread and 'tabindex="-1"' in thread
    # The shortcuts are written on the page, not only wired in the script.
    assert "<kbd>j</kbd>" in html and "next finding" in html
    assert f"0 of {len(kept)} triaged" in html


def test_a_decision_on_the_diff_answers_with_its_thread_and_redraws_the_card(alice_client,
                                                                              triage_run):
    run = triage_run
    review = Review.objects.get(run=run)
    first, second = review.findings.filter(kept=True)[:2]
    url = reverse("finding_decision", args=[run.pk, first.key])
    data = {"decision": "accepted", "seen": "pending", "view": "diff"}
    r = alice_client.post(url, data, HTTP_HX_REQUEST="true",
                          HTTP_HX_TARGET=f"thread-{first.key}")
    assert r.status_code == 200
    html = r.content.decode()
    assert html.lstrip().startswith('<div class="thread-item')
    assert html.index(f'id="thread-{first.key}"') < html.index(f'id="finding-{first.key}"')
    assert "Accepted</span> by alice" in thread_of(html + "</form>", first.key)
    assert f'id="finding-{first.key}" hx-swap-oob="true"' in html  # the card, out of band
    for oob in ("triage-bar", "triage-summary", "verdict-panel", "history-panel"):
        assert f'id="{oob}" hx-swap-oob="true"' in html, oob
    first.refresh_from_db()
    assert first.decision == "accepted"
    # The same click again from the page that still showed it pending: refused, current state.
    r = alice_client.post(url, data, HTTP_HX_REQUEST="true",
                          HTTP_HX_TARGET=f"thread-{first.key}")
    assert r.status_code == 409 and b"since this page was loaded" in r.content
    assert r.content.decode().lstrip().startswith('<div class="thread-item')
    # A decision from a card answers with the card and redraws the thread out of band.
    r = alice_client.post(reverse("finding_decision", args=[run.pk, second.key]),
                          {"decision": "rejected", "seen": "pending"}, HTTP_HX_REQUEST="true",
                          HTTP_HX_TARGET=f"finding-{second.key}")
    html = r.content.decode()
    assert r.status_code == 200 and html.lstrip().startswith('<li class="finding')
    assert f'id="thread-{second.key}" hx-swap-oob="true"' in html
    # Without JavaScript the form posts and comes back to the finding on the diff.
    undo = alice_client.post(url, {"decision": "pending", "view": "diff"})
    assert undo.status_code == 302 and undo["Location"].endswith(f"#thread-{first.key}")
    bad = alice_client.post(url, {"decision": "accepted", "view": "sideways"},
                            HTTP_HX_REQUEST="true", HTTP_HX_TARGET=f"thread-{first.key}")
    assert bad.status_code == 400 and b"could not be read" in bad.content
    first.refresh_from_db()
    assert first.decision == "pending"


def test_a_live_decision_redraws_the_threads_and_the_triage_bar(alice_client, triage_run):
    from reviews_app.views import render_live_update

    run = triage_run
    review = Review.objects.get(run=run)
    first = review.findings.filter(kept=True).first()
    before = run.events.count()
    alice_client.post(reverse("finding_decision", args=[run.pk, first.key]),
                      {"decision": "accepted"})
    events = list(run.events.filter(seq__gt=before))
    html = render_live_update(run, events, set())
    assert f'id="thread-{first.key}" hx-swap-oob="true"' in html
    assert 'id="triage-bar" hx-swap-oob="true"' in html and "1 of" in html
