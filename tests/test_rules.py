"""Review rules on the Django side (``reviews_app.rules.service``): which rules a review receives in
``options["review_rules"]`` (web form / services, pull-request flow, ``manage.py review``),
counting ``times_applied``, and suggesting rules from triage (the material, a scripted model,
the offline model, dedupe and idempotence, the worker task)."""

from __future__ import annotations

import pytest
from django.core.management import call_command

import config
from agents_app import engine
from agents_app.models import Run
from agents_app.patterns.base import ModelError
from agents_app.patterns.testing import FunctionModel, QueueModel
from reviews_app.models import Finding, Review, ReviewRule
from reviews_app.rules import generate as rulegen
from reviews_app.rules import service as rules
from reviews_app.triage import service as triage
from tests import prflow_support as support
from tests.prflow_support import deliver, open_pull
from tests.test_review_views import start
from tests.webhook_helpers import make_conn

host, conn = support.host, support.conn  # the fixtures
ACTIVE, PENDING, RETIRED = ReviewRule.Status.ACTIVE, ReviewRule.Status.PENDING, \
    ReviewRule.Status.RETIRED


def make_rule(owner, title="No eval", status=ACTIVE, glob="app/**", **kw):
    return ReviewRule.objects.create(owner=owner, title=title, text=f"{title}: never.",
                                     path_glob=glob, status=status, **kw)


# --- what a review receives ------------------------------------------------------------------
def test_options_carry_only_the_owners_active_rules_that_match(db, alice, bob):
    mine = make_rule(alice, severity="high", matcher={"pattern": r"\beval\("},
                     origin="comments")
    everywhere = make_rule(alice, "Log errors", glob="**")
    make_rule(alice, "Pending", status=PENDING)
    make_rule(alice, "Retired", status=RETIRED)
    make_rule(alice, "Docs only", glob="docs/**")
    make_rule(bob, "Bob's rule", glob="**")
    other_conn = make_conn(alice, repository="octo/other")
    make_rule(alice, "Other repository", connection=other_conn, glob="**")
    run = start(alice)
    assert run.options["review_rules"] == [
        {"id": f"rule:{mine.pk}", "title": "No eval", "text": "No eval: never.",
         "path_glob": "app/**", "severity": "high", "pattern": r"\beval\(",
         "source": "comments"},
        {"id": f"rule:{everywhere.pk}", "title": "Log errors", "text": "Log errors: never.",
         "path_glob": "**", "severity": "medium", "pattern": "", "source": "manual"}]


def test_no_rule_no_option(db, alice, bob):
    make_rule(bob, glob="**")
    make_rule(alice, status=PENDING)
    assert "review_rules" not in start(alice).options


def test_a_connections_rules_reach_its_reviews_only(db, alice):
    c1, c2 = make_conn(alice, repository="octo/one"), make_conn(alice, repository="octo/two")
    own = make_rule(alice, "One only", connection=c1, glob="**")
    mine = make_rule(alice, "All mine", glob="**")
    paths = ["app/users.py"]
    assert [r["id"] for r in rules.for_review(alice, c1, paths)] == [f"rule:{own.pk}",
                                                                     f"rule:{mine.pk}"]
    assert [r["id"] for r in rules.for_review(alice, c2, paths)] == [f"rule:{mine.pk}"]
    assert [r["id"] for r in rules.for_review(alice, None, paths)] == [f"rule:{mine.pk}"]


def test_a_pull_request_review_carries_its_connections_rules(db, host, conn):
    rule = make_rule(conn.owner, "PR rule", connection=conn, glob="**")
    make_rule(conn.owner, "Other repo", connection=make_conn(conn.owner, repository="x/y"),
              glob="**")
    open_pull(host)
    _, out = deliver(conn)
    assert out.status == "done", out.detail
    run = Run.objects.get(pk=out.run_id)
    assert [r["id"] for r in run.options["review_rules"]] == [f"rule:{rule.pk}"]


def test_manage_py_review_carries_the_rules_unless_told_not_to(transactional_db, alice,
                                                               tmp_path, capsys):
    from tests.review_corpus import GOOD

    rule = make_rule(alice, glob="**")
    diff = tmp_path / "c.diff"
    diff.write_text(GOOD)
    for extra, expected in (([], [f"rule:{rule.pk}"]), (["--no-rules"], [])):
        with pytest.raises(SystemExit):
            call_command("review", str(diff), "--user", "alice", *extra)
        run = Run.objects.order_by("-pk").first()
        assert [r["id"] for r in run.options.get("review_rules", [])] == expected
    capsys.readouterr()


def test_times_applied_counts_kept_findings_naming_the_rule(db, alice, bob):
    a, b = make_rule(alice), make_rule(alice, "Other")
    theirs = make_rule(bob)
    review = Review(owner=alice)
    rules.count_applied(review, [
        {"rule": {"id": f"rule:{a.pk}"}}, {"rule": {"id": f"rule:{a.pk}", "title": "x"}},
        {"rule": {"id": f"rule:{theirs.pk}"}},  # another user's rule: never counted
        {"rule": {"id": "rule:x"}}, {"rule": "rule:1"}, {"rule": {}}, {}, "junk"])
    for r in (a, b, theirs):
        r.refresh_from_db()
    assert (a.times_applied, b.times_applied, theirs.times_applied) == (2, 0, 0)


def test_synthesis_counts_through_records(transactional_db, alice, monkeypatch):
    """records.py calls count_applied with the kept findings of the synthesis."""
    seen = []
    monkeypatch.setattr(rules, "count_applied", lambda review, found: seen.append(
        (review.owner_id, len(found))))
    run = engine.run_inline(start(alice).pk)
    review = Review.objects.get(run=run)
    assert seen == [(alice.pk, review.findings.filter(kept=True).count())]


# --- suggesting rules ------------------------------------------------------------------------------
@pytest.fixture
def review(transactional_db, alice):
    run = engine.run_inline(start(alice).pk)
    assert run.status == "awaiting_triage", run.error
    return Review.objects.get(run=run)


def kept_findings(review):
    return list(review.findings.filter(kept=True).order_by("position"))


def decide(review, finding, user, decision, comment="", reason=""):
    triage.decide_finding(review, finding.key, user, decision, comment, reason=reason)


def test_material_is_comments_and_reasons_masked_and_never_another_users(review, alice, bob):
    f1, f2, *rest = kept_findings(review)
    decide(review, f1, alice, "accepted", "Always quote shell args; key sk-ant-api03-"
                                          "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA here")
    decide(review, f2, alice, "rejected", reason="intended")
    items = rules.material(alice)
    assert {i["id"] for i in items} == {str(f1.pk), str(f2.pk)}
    by_id = {i["id"]: i for i in items}
    assert by_id[str(f1.pk)]["kind"] == "comment" and "AAAAAAAAAAAAAAAA" not in \
        by_id[str(f1.pk)]["text"]
    assert (by_id[str(f2.pk)]["kind"], by_id[str(f2.pk)]["reason"]) == ("rejection", "intended")
    assert rules.material(bob) == []
    other = make_conn(alice, repository="octo/other")
    assert rules.material(alice, other) == []  # a pasted diff belongs to no connection


def test_suggest_with_a_scripted_model_saves_pending_rules_and_is_idempotent(review, alice):
    f1, f2, *_ = kept_findings(review)
    decide(review, f1, alice, "accepted", "We always pass argument lists to subprocess.")
    decide(review, f2, alice, "rejected", "eval is fine in the REPL module", reason="other")
    existing = make_rule(alice, "Quote shell arguments", status=RETIRED)
    existing.text = "Pass argument lists to subprocess, never a shell string."
    existing.save()
    model = QueueModel({"rules": [
        {"title": "Argument lists for subprocess", "text": "Call subprocess with a list.",
         "path_glob": "app/**", "severity": "high", "pattern": r"shell=True",
         "source_ids": [str(f1.pk)]},
        {"title": "Quote shell arguments", "text": "Pass argument lists to subprocess.",
         "source_ids": [str(f1.pk)]},  # the retired rule's title: dropped
        {"title": "Argument list for subprocess.", "text": "Same again",
         "source_ids": [str(f1.pk)]},  # its own repeat: dropped
    ]})
    out = rules.suggest(alice, user=alice, client=model)
    assert out.material == 2 and out.duplicates == 2 and not out.error
    [r] = out.created
    r.refresh_from_db()
    assert (r.status, r.origin, r.owner, r.connection, r.created_by) == (
        PENDING, "comments", alice, None, alice)
    assert r.matcher == {"pattern": "shell=True"} and r.severity == "high"
    assert r.source_findings == [f1.pk]
    assert r.source_text == "comment: We always pass argument lists to subprocess."
    # Pressing again: the finding a rule came from is not sent again.
    model.enqueue({"rules": [{"title": "Eval only in the REPL", "text": "Keep eval in repl/.",
                              "source_ids": [str(f2.pk)]}]})
    again = rules.suggest(alice, user=alice, client=model)
    assert [x.title for x in again.created] == ["Eval only in the REPL"]
    assert again.created[0].origin == "rejections"
    material = model.history[1].prompt.split("## Existing rules")[0]
    assert "argument lists to subprocess" not in material and "REPL module" in material
    third = QueueModel()
    assert rules.suggest(alice, user=alice, client=third).created == []
    assert third.history == []  # nothing new: no model call
    assert ReviewRule.objects.filter(owner=alice, status=PENDING).count() == 2
    assert "review_rules" not in start(alice).options  # pending rules reach no review


def test_a_model_error_saves_nothing_and_says_why(review, alice):
    f1 = kept_findings(review)[0]
    decide(review, f1, alice, "accepted", "Never build SQL from strings in this app.")
    model = FunctionModel(lambda m, i: ModelError("provider said no: sk-ant-api03-" + "B" * 40))
    out = rules.suggest(alice, user=alice, client=model)
    assert out.error and "BBBBBBBBBBBBBBBB" not in out.error
    assert not ReviewRule.objects.exists()


def test_the_offline_model_suggests_from_instructions_only(review, alice, settings):
    settings.QUORUM_ROLE_MODELS = {**settings.QUORUM_ROLE_MODELS, "synthesizer":
                                   "offline/default"}
    f1, f2, *_ = kept_findings(review)
    decide(review, f1, alice, "accepted", "Never pass user input to eval.")
    decide(review, f2, alice, "accepted", "Thanks, good catch.")
    out = rules.start_suggest(alice, user=alice)
    assert out.offline and not out.queued and out.material == 2
    [r] = out.created
    assert r.title == "Never pass user input to eval" and r.path_glob == "app/**"
    assert rulegen.OFFLINE_NOTE in r.text and r.status == PENDING
    again = rules.start_suggest(alice, user=alice)
    assert again.created == [] and again.material == 1  # only the thank-you is left
    assert ReviewRule.objects.count() == 1


def test_a_priced_model_goes_to_the_worker(review, alice, settings, monkeypatch):
    from reviews_app import tasks

    settings.QUORUM_ROLE_MODELS = {**settings.QUORUM_ROLE_MODELS, "synthesizer": "gpt-4o"}
    monkeypatch.setattr(rules, "missing_credentials", lambda model: None)
    sent = []
    monkeypatch.setattr(config, "send_task", lambda name, args: sent.append((name, *args)))
    f1 = kept_findings(review)[0]
    decide(review, f1, alice, "accepted", "Always log before returning 500.")
    out = rules.start_suggest(alice, user=alice)
    assert out.queued and sent == [("reviews_app.tasks.suggest_rules", alice.pk, None, alice.pk)]
    # The worker's side, with a scripted client standing in for the provider.
    model = QueueModel({"rules": [{"title": "Log before 500", "text": "Log, then 500.",
                                   "source_ids": [str(f1.pk)]}]})
    monkeypatch.setattr(rules, "generation_client", lambda m: model)
    assert tasks.suggest_rules(alice.pk, None, alice.pk) == "created 1"
    assert tasks.suggest_rules(alice.pk, 2**40, alice.pk) == "gone"  # no such connection
    assert ReviewRule.objects.get().title == "Log before 500"


def test_missing_credentials_refuse_before_any_call(review, alice, settings, monkeypatch):
    settings.QUORUM_ROLE_MODELS = {**settings.QUORUM_ROLE_MODELS, "synthesizer": "gpt-4o"}
    monkeypatch.setattr(rules, "missing_credentials", lambda model: "No credentials for it.")
    out = rules.start_suggest(alice, user=alice)
    assert out.error == "No credentials for it." and not out.queued
    assert not ReviewRule.objects.exists()


def test_rejections_without_words_teach_the_offline_model_nothing(review, alice, settings):
    settings.QUORUM_ROLE_MODELS = {**settings.QUORUM_ROLE_MODELS, "synthesizer":
                                   "offline/default"}
    for f in kept_findings(review):
        decide(review, f, alice, "rejected", reason="wrong")
    out = rules.start_suggest(alice, user=alice)
    assert out.material == Finding.objects.filter(review=review, decision="rejected").count()
    assert out.material > 0 and out.created == [] and not ReviewRule.objects.exists()
