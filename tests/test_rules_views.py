"""The review rules page: access for every view (owner, another user → 404 and nothing
changed, anonymous → sign-in), writing a rule and every bad input (clear message, no 500,
nothing saved), approve / edit / retire / restore / delete (htmx and plain posts), and
"Suggest rules" with the offline model."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents_app import engine
from reviews_app.models import Review, ReviewRule
from reviews_app.rules import generate as rulegen
from reviews_app.triage import service as triage
from tests.test_review_views import start
from tests.webhook_helpers import make_conn

HTMX = {"HTTP_HX_REQUEST": "true"}
PENDING, ACTIVE, RETIRED = "pending", "active", "retired"
GOOD_RULE = {"title": "No eval", "text": "Never call eval on request data.",
             "path_glob": "app/**", "severity": "high", "pattern": r"\beval\(", "scope": ""}


def make_rule(owner, title="Log errors", status=PENDING, **kw):
    return ReviewRule.objects.create(owner=owner, title=title, text=f"{title}, always.",
                                     path_glob="**", status=status, **kw)


def rows():
    return list(ReviewRule.objects.order_by("pk").values())


# --- access ------------------------------------------------------------------------------------
PK_VIEWS = ["rule_edit", "rule_approve", "rule_retire", "rule_restore", "rule_delete"]


def test_anonymous_visitors_are_sent_to_sign_in(client, db, alice):
    rule = make_rule(alice)
    before = rows()
    for name, args in [("review_rules", []), ("rule_new", []), ("rule_suggest", []),
                       *((n, [rule.pk]) for n in PK_VIEWS)]:
        url = reverse(name, args=args)
        r = client.get(url) if name == "review_rules" else client.post(url, GOOD_RULE)
        assert r.status_code == 302 and r.url.startswith("/accounts/login/"), name
    assert rows() == before


@pytest.mark.parametrize("status", [PENDING, ACTIVE, RETIRED])
def test_another_user_gets_404_and_changes_nothing(bob_client, db, alice, status):
    rule = make_rule(alice, status=status)
    before = rows()
    for name in PK_VIEWS:
        for extra in ({}, HTMX):
            r = bob_client.post(reverse(name, args=[rule.pk]), GOOD_RULE, **extra)
            assert r.status_code == 404, name
    assert rows() == before


def test_each_person_sees_only_their_rules_staff_too(client, db, alice, bob):
    make_rule(alice, "Alice's secret rule")
    make_rule(bob, "Bob's rule")
    bob.is_staff = True
    bob.save()
    client.force_login(bob)
    html = client.get(reverse("review_rules")).content.decode()
    assert "Bob's rule" in html and "Alice" not in html
    client.force_login(alice)
    html = client.get(reverse("review_rules")).content.decode()
    assert "Alice&#x27;s secret rule" in html and "Bob" not in html
    assert reverse("review_rules") in html  # the nav link


def test_the_page_lists_the_three_groups(alice_client, alice):
    make_rule(alice, "Waiting one", origin="comments", source_text="comment: always x",
              source_findings=[1])
    make_rule(alice, "Working one", status=ACTIVE, times_applied=3)
    make_rule(alice, "Old one", status=RETIRED)
    html = alice_client.get(reverse("review_rules")).content.decode()
    pending = html[html.index('id="rules-pending"'):html.index('id="rules-active"')]
    active = html[html.index('id="rules-active"'):html.index('id="rules-retired"')]
    retired = html[html.index('id="rules-retired"'):]
    assert "Waiting one" in pending and "Generated from review comments" in pending
    assert "Made from 1 finding" in pending and "Approve" in pending
    assert "Working one" in active and "found 3 violations" in active
    assert "Old one" in retired and "Restore" in retired


# --- writing a rule --------------------------------------------------------------------------------
def test_writing_a_rule_makes_it_active_at_once(alice_client, alice):
    conn = make_conn(alice)
    r = alice_client.post(reverse("rule_new"), GOOD_RULE | {"scope": str(conn.pk)})
    [rule] = ReviewRule.objects.all()
    assert r.status_code == 302 and r.url.endswith(f"#rule-{rule.pk}")
    assert (rule.owner, rule.status, rule.origin, rule.connection, rule.decided_by) == (
        alice, ACTIVE, "manual", conn, alice)
    assert rule.matcher == {"pattern": r"\beval\("} and rule.severity == "high"
    r = alice_client.post(reverse("rule_new"), GOOD_RULE | {"title": "Other", "pattern": "  "})
    assert ReviewRule.objects.get(title="Other").matcher == {}


@pytest.mark.parametrize(("change", "words"), [
    ({"title": ""}, "short title"),
    ({"text": "   "}, "Write the rule"),
    ({"title": "a\x00b"}, "NUL byte"),
    ({"text": "never\x00"}, "NUL byte"),
    ({"path_glob": "app/\x00**"}, "NUL byte"),
    ({"pattern": "eval\x00"}, "NUL byte"),
    ({"text": "x" * 2001}, "under 2,000 characters"),
    ({"title": "x" * 201}, "under 200 characters"),
    ({"path_glob": "../**"}, ". or .. folders"),
    ({"path_glob": "/etc/**"}, "relative to the repository root"),
    ({"path_glob": ""}, "path glob"),
    ({"pattern": "eval("}, "not a valid regular expression"),
    ({"pattern": r"(a)\1"}, "refers back to a group"),
    ({"pattern": "foo(?=bar)"}, "lookahead"),
    ({"pattern": "a" * 301}, "under 300 characters"),
    ({"severity": "info"}, "critical, high, medium or low"),
    ({"severity": "x" * 5000}, "critical, high, medium or low"),
    ({"scope": "999999"}, "one of your connections"),
    ({"scope": "abc"}, "one of your connections"),
])
def test_bad_input_is_refused_with_a_message_and_nothing_saved(alice_client, change, words):
    r = alice_client.post(reverse("rule_new"), GOOD_RULE | change)
    assert r.status_code == 400
    html = r.content.decode()
    assert "The rule was not saved" in html and words in html.replace("&#x27;", "'")
    assert not ReviewRule.objects.exists()


def test_another_users_connection_is_refused(alice_client, bob):
    theirs = make_conn(bob, repository="bob/private")
    r = alice_client.post(reverse("rule_new"), GOOD_RULE | {"scope": str(theirs.pk)})
    assert r.status_code == 400 and "one of your connections" in r.content.decode()
    assert "bob/private" not in r.content.decode()
    assert not ReviewRule.objects.exists()


def test_a_duplicate_or_resubmitted_rule_is_refused(alice_client, alice):
    assert alice_client.post(reverse("rule_new"), GOOD_RULE).status_code == 302
    r = alice_client.post(reverse("rule_new"), GOOD_RULE)  # the same form sent again
    assert r.status_code == 400 and "has this title already" in r.content.decode()
    r = alice_client.post(reverse("rule_new"), GOOD_RULE | {"title": "  no   EVAL. "})
    assert r.status_code == 400
    assert ReviewRule.objects.count() == 1
    # Another scope, or once the first is retired: fine.
    conn = make_conn(alice)
    assert alice_client.post(reverse("rule_new"), GOOD_RULE | {"scope": conn.pk}) \
        .status_code == 302
    ReviewRule.objects.filter(connection=None).update(status=RETIRED)
    assert alice_client.post(reverse("rule_new"), GOOD_RULE).status_code == 302


def test_the_form_keeps_what_was_typed_after_a_refusal(alice_client):
    r = alice_client.post(reverse("rule_new"), GOOD_RULE | {"pattern": "(", "title": "<b>T</b>"})
    html = r.content.decode()
    assert 'value="&lt;b&gt;T&lt;/b&gt;"' in html and "<b>T</b>" not in html


# --- approve, retire, restore, delete, edit ------------------------------------------------------
def test_approve_retire_restore_with_htmx(alice_client, alice):
    rule = make_rule(alice)
    r = alice_client.post(reverse("rule_approve", args=[rule.pk]), **HTMX)
    assert r.status_code == 200 and "approved: the next reviews check it" in r.content.decode()
    rule.refresh_from_db()
    assert (rule.status, rule.decided_by) == (ACTIVE, alice) and rule.decided_at
    r = alice_client.post(reverse("rule_approve", args=[rule.pk]), **HTMX)
    assert r.status_code == 200 and "already" in r.content.decode()
    r = alice_client.post(reverse("rule_retire", args=[rule.pk]), **HTMX)
    assert r.status_code == 200 and ReviewRule.objects.get().status == RETIRED
    r = alice_client.post(reverse("rule_approve", args=[rule.pk]), **HTMX)
    assert r.status_code == 409 and "cannot be approved" in r.content.decode()
    r = alice_client.post(reverse("rule_restore", args=[rule.pk]), **HTMX)
    assert r.status_code == 200 and ReviewRule.objects.get().status == ACTIVE
    r = alice_client.post(reverse("rule_restore", args=[rule.pk]))  # plain post: redirect
    assert r.status_code == 302 and r.url.endswith(f"#rule-{rule.pk}")


def test_only_a_suggestion_can_be_deleted(alice_client, alice):
    active = make_rule(alice, "Active", status=ACTIVE)
    r = alice_client.post(reverse("rule_delete", args=[active.pk]), **HTMX)
    assert r.status_code == 409 and "Retire it instead" in r.content.decode()
    r = alice_client.post(reverse("rule_delete", args=[active.pk]))  # plain: the page
    assert r.status_code == 409 and "Retire it instead" in r.content.decode()
    pending = make_rule(alice, "Pending")
    r = alice_client.post(reverse("rule_delete", args=[pending.pk]), **HTMX)
    assert r.status_code == 200 and f"Suggestion #{pending.pk} deleted" in r.content.decode()
    assert list(ReviewRule.objects.values_list("title", flat=True)) == ["Active"]
    r = alice_client.post(reverse("rule_delete", args=[pending.pk]), **HTMX)
    assert r.status_code == 404  # deleted twice


def test_edit_saves_every_field(alice_client, alice):
    rule = make_rule(alice, matcher={"pattern": "x", "other": 1})
    conn = make_conn(alice)
    r = alice_client.post(reverse("rule_edit", args=[rule.pk]), GOOD_RULE | {
        "scope": conn.pk, "pattern": ""}, **HTMX)
    assert r.status_code == 200 and f"Rule #{rule.pk} saved." in r.content.decode()
    rule.refresh_from_db()
    assert (rule.title, rule.text, rule.path_glob, rule.severity, rule.connection) == (
        "No eval", GOOD_RULE["text"], "app/**", "high", conn)
    assert rule.matcher == {"other": 1} and rule.status == PENDING  # editing approves nothing


@pytest.mark.parametrize("change", [{"title": ""}, {"pattern": "(?<=a)b"}, {"text": "\x00"},
                                    {"path_glob": "a/../b"}, {"severity": "urgent"}])
def test_a_bad_edit_changes_nothing(alice_client, alice, change):
    rule = make_rule(alice)
    before = rows()
    r = alice_client.post(reverse("rule_edit", args=[rule.pk]), GOOD_RULE | change, **HTMX)
    assert r.status_code == 400 and f"Rule #{rule.pk} was not changed" in r.content.decode()
    r = alice_client.post(reverse("rule_edit", args=[rule.pk]), GOOD_RULE | change)
    assert r.status_code == 400 and f"Rule #{rule.pk} was not changed" in r.content.decode()
    assert rows() == before


def test_an_edit_may_not_take_another_rules_title(alice_client, alice):
    make_rule(alice, "No eval", status=ACTIVE)
    other = make_rule(alice, "Something")
    r = alice_client.post(reverse("rule_edit", args=[other.pk]), GOOD_RULE, **HTMX)
    assert r.status_code == 400 and "has this title already" in r.content.decode()
    # Its own title is no clash.
    r = alice_client.post(reverse("rule_edit", args=[other.pk]),
                          GOOD_RULE | {"title": "Something"}, **HTMX)
    assert r.status_code == 200


# --- suggest ----------------------------------------------------------------------------------------
@pytest.fixture
def offline_synth(settings):
    settings.QUORUM_ROLE_MODELS = {**settings.QUORUM_ROLE_MODELS, "synthesizer":
                                   "offline/default"}


def test_suggest_with_the_offline_model_says_so(transactional_db, alice_client, alice,
                                                offline_synth):
    r = alice_client.post(reverse("rule_suggest"))
    assert r.status_code == 302 and r["Location"] == reverse("review_rules") + "#suggested"
    r = alice_client.get(r["Location"])
    assert r.status_code == 200 and "Nothing new to learn from" in r.content.decode()
    # post/redirect/get: loading the page again shows it without the outcome, sending nothing
    assert "Nothing new to learn from" not in alice_client.get(reverse("review_rules")).content.decode()
    run = engine.run_inline(start(alice).pk)
    review = Review.objects.get(run=run)
    f = review.findings.filter(kept=True).first()
    triage.decide_finding(review, f.key, alice, "accepted", "Never shell out with a string.")
    r = alice_client.post(reverse("rule_suggest"), {"scope": ""}, follow=True)
    html = r.content.decode()
    assert r.status_code == 200 and "1 rule suggested after reading 1 triage note (comments" in html
    assert "offline model, which understands no text" in html
    [rule] = ReviewRule.objects.all()
    assert rule.status == PENDING and rulegen.OFFLINE_NOTE in rule.text
    pending = html[html.index('id="rules-pending"'):html.index('id="rules-active"')]
    assert "Never shell out with a string" in pending
    r = alice_client.post(reverse("rule_suggest"), follow=True)  # again: nothing doubled
    assert "Nothing new to learn from" in r.content.decode() and ReviewRule.objects.count() == 1


@pytest.mark.parametrize("scope", ["999999", "x", "1" * 40, "-1"])
def test_suggest_refuses_an_unknown_scope(alice_client, offline_synth, scope):
    r = alice_client.post(reverse("rule_suggest"), {"scope": scope})
    assert r.status_code == 400 and "one of your connections" in r.content.decode()


def test_suggest_refuses_another_users_connection(alice_client, bob, offline_synth):
    theirs = make_conn(bob, repository="bob/private")
    r = alice_client.post(reverse("rule_suggest"), {"scope": str(theirs.pk)})
    assert r.status_code == 400 and not ReviewRule.objects.exists()


def test_suggest_for_one_connection(alice_client, alice, offline_synth):
    conn = make_conn(alice)
    r = alice_client.post(reverse("rule_suggest"), {"scope": str(conn.pk)}, follow=True)
    assert r.status_code == 200 and "Nothing new to learn from" in r.content.decode()
    assert f'<option value="{conn.pk}" selected>' in r.content.decode()


def test_writing_a_rule_with_htmx_sends_the_browser_to_it(alice_client):
    r = alice_client.post(reverse("rule_new"), GOOD_RULE, **HTMX)
    rule = ReviewRule.objects.get()
    assert r.status_code == 200 and r["HX-Redirect"].endswith(f"/rules/#rule-{rule.pk}")
    r = alice_client.post(reverse("rule_new"), GOOD_RULE | {"pattern": "("}, **HTMX)
    assert r.status_code == 400 and "The rule was not saved" in r.content.decode()


# --- patterns are matched with RE2 (issue 36) ---------------------------------------------------
BACKTRACKING = "(a?){40}a{40}"  # hours with Python's re on a line of 40 a's


def test_a_pattern_of_the_backtracking_shape_is_saved_and_matches_at_once(alice_client, alice):
    r = alice_client.post(reverse("rule_new"), GOOD_RULE | {"pattern": BACKTRACKING})
    assert r.status_code == 302
    rule = ReviewRule.objects.get(owner=alice)
    assert rule.matcher == {"pattern": BACKTRACKING} and rule.pattern_problem == ""
    from reviews_app.rules import check as rulecheck

    compiled, why = rulecheck.compile_pattern(rule.matcher["pattern"])
    assert why == "" and compiled.search("a" * 40) and not compiled.search("a" * 39)


def test_a_stored_pattern_re2_cannot_run_is_shown_as_not_used(alice_client, alice):
    rule = make_rule(alice, "Old rule", status=ACTIVE, matcher={"pattern": r"(x)\1"})
    html = alice_client.get(reverse("review_rules")).content.decode()
    assert "This pattern is not used by reviews" in html and "refers back to a group" in html
    assert rule.pattern_problem.startswith("The pattern refers back to a group")


def test_the_command_line_checks_stored_patterns_and_refuses_bad_ones(alice):
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    out = StringIO()
    call_command("review_rules", "add", "--owner", alice.username, "--title", "Fast",
                 "--text", "No long runs of a.", "--pattern", BACKTRACKING, stdout=out)
    assert "Saved rule #" in out.getvalue()
    with pytest.raises(CommandError, match="lookbehind"):
        call_command("review_rules", "add", "--owner", alice.username, "--title", "Slow",
                     "--text", "Nothing.", "--pattern", "(?<=a)b")
    assert ReviewRule.objects.filter(owner=alice).count() == 1
    call_command("review_rules", "check", stdout=(out := StringIO()))
    assert "0 rule(s)" in out.getvalue()
    bad = make_rule(alice, "Old rule", status=ACTIVE, matcher={"pattern": r"(x)\1"})
    with pytest.raises(SystemExit) as exit_:
        call_command("review_rules", "check", stdout=(out := StringIO()))
    assert exit_.value.code == 1
    assert f"rule #{bad.pk}" in out.getvalue() and "refers back to a group" in out.getvalue()
