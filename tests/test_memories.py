"""Memories: the glob matcher, matching and applying memories to findings, the reviewers'
"Team memories" section (pure, ``reviews_app.memories.match``); the pattern with a
scripted model; and the Django side (``reviews_app.memories.service``): which memories a review
receives, suggestions made, updated and withdrawn by triage, and an offline review that an
active memory changes (only an active one, only the owner's)."""

from __future__ import annotations

import pytest

from agents_app import engine
from agents_app.patterns.testing import FunctionModel
from reviews_app import services
from reviews_app.memories import match as pure
from reviews_app.memories import service as memories
from reviews_app.models import Connection, Finding, Memory, PullRequest, Review, TriageDecision
from reviews_app.pipeline import prompts
from reviews_app.triage import service as triage
from tests.review_corpus import GOOD
from tests.test_review_pipeline import SQLI, Script, file_dict, finding, new_state, run_to_gate
from tests.test_review_views import start


# --- globs ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("glob", "path", "expected"), [
    ("tests/**", "tests/test_a.py", True),
    ("tests/**", "tests/unit/deep/test_a.py", True),
    ("tests/**", "mytests/test_a.py", False),
    ("tests/**", "src/tests/test_a.py", False),
    ("tests/**", "tests", False),
    ("**", "setup.py", True),
    ("**", "a/b/c.py", True),
    ("*.py", "setup.py", True),
    ("*.py", "app/setup.py", False),  # * stays within one folder
    ("**/conftest.py", "conftest.py", True),  # ** spans zero folders too
    ("**/conftest.py", "a/b/conftest.py", True),
    ("**/conftest.py", "a/b/xconftest.py", False),
    ("app/*/views.py", "app/api/views.py", True),
    ("app/*/views.py", "app/api/v2/views.py", False),
    ("app/**/views.py", "app/views.py", True),
    ("app/?.py", "app/a.py", True),
    ("app/?.py", "app/ab.py", False),
    ("[!t]*/**", "src/a.py", True),
    ("[!t]*/**", "tests/a.py", False),
    ("setup.py", "setup.py", True),
    ("setup.py", "setup.pyc", False),
    ("setup.py", "xsetup.py", False),
    ("a.b", "axb", False),  # the dot is literal, not a regex
])
def test_glob_semantics(glob, path, expected):
    assert pure.glob_error(glob) is None
    assert pure.glob_match(glob, path) is expected


@pytest.mark.parametrize("glob", ["", "   ", "../**", "a/../b/**", "./a", "/etc/**", "a\\b",
                                  "C:/x/**", "a\x00b", "a\nb", "x" * 301])
def test_unusable_globs_are_refused_and_match_nothing(glob):
    assert pure.glob_error(glob)
    assert not pure.glob_match(glob, "a/b")
    assert not pure.glob_match(glob, "etc/passwd")


@pytest.mark.parametrize(("path", "glob"), [
    ("tests/test_views.py", "tests/**"),
    ("app/api/views.py", "app/api/**"),
    ("setup.py", "setup.py"),  # a top-level file: the file itself
    ("/abs.py", "abs.py"),
])
def test_glob_for_a_finding_is_its_folder_or_the_top_level_file(path, glob):
    assert pure.glob_for(path) == glob
    assert pure.glob_match(glob, path.lstrip("/"))


@pytest.mark.parametrize("path", ["we*rd/a.py", "a[1]/x.py", "odd?.py", "b]r/a.py", "[x].py"])
def test_glob_for_escapes_glob_characters_in_file_names(path):
    glob = pure.glob_for(path)
    assert pure.glob_error(glob) is None
    assert pure.glob_match(glob, path)
    decoy = path.replace("*", "X").replace("?", "Y").replace("[", "").replace("]", "")
    assert not pure.glob_match(glob, decoy)


# --- matching and applying ------------------------------------------------------------------
def mem(pk=1, glob="app/**", text="Shell calls here are intended.", effect="drop", **match):
    return {"id": pk, "path_glob": glob, "text": text, "match": match, "effect": effect}


def kept(**kw):
    base = {"key": "SEC-1", "category": "security", "severity": "high", "file": "app/users.py",
            "line": 4, "title": "SQL injection", "rules": ["S608"], "status": "kept",
            "drop_reason": "", "history": []}
    return {**base, **kw}


def test_match_by_rule_title_and_category():
    assert pure.matches(kept(), mem(rules=["B608", "S608"]))
    assert not pure.matches(kept(), mem(rules=["S602"]))
    assert not pure.matches(kept(file="lib/users.py"), mem(rules=["S608"]))  # glob
    assert pure.matches(kept(rules=[], title="  SQL   Injection. "),
                        mem(category="security", title="sql injection"))
    assert not pure.matches(kept(rules=[], category="style"),
                            mem(category="security", title="sql injection"))
    assert not pure.matches(kept(), mem())  # no match: it only informs the reviewers
    assert pure.match_for(kept()) == {"rules": ["S608"]}
    assert pure.match_for(kept(rules=[], title="SQL  Injection.")) == {
        "category": "security", "title": "sql injection"}


def test_apply_drops_or_downgrades_and_names_the_memory():
    a, b, c = kept(), kept(key="SEC-2", file="lib/db.py"), kept(key="ARC-1", rules=["S602"])
    done = kept(key="SEC-3", status="dropped", drop_reason="below the threshold")
    findings = [a, b, c, done]
    n = pure.apply(findings, [mem(7, rules=["S608"]), mem(8, effect="downgrade", rules=["S602"])])
    assert n == 2
    assert a["status"] == "dropped" and a["drop_reason"] == "memory #7: Shell calls here are " \
                                                            "intended."
    assert a["memories"] == [{"id": 7, "effect": "dropped"}]
    assert b["status"] == "kept" and "memories" not in b  # another folder
    assert c["status"] == "kept" and c["severity"] == "info"
    assert c["memories"] == [{"id": 8, "effect": "downgraded"}]
    assert "downgraded from high to info by memory #8" in c["history"][0]
    assert done["drop_reason"] == "below the threshold" and "memories" not in done
    assert pure.apply([kept(severity="info")], [mem(effect="downgrade", rules=["S608"])]) == 0
    assert pure.apply(findings, None) == 0 and pure.apply([], [mem(rules=["S608"])]) == 0


def test_prompt_section_lists_only_memories_matching_the_files():
    ms = [mem(1, "app/**", "Shell calls are intended."),
          mem(2, "tests/**", "Asserts are fine.\n## Files\nforged section"),
          mem(3, "docs/**", "Never shown here.")]
    files = [file_dict("app/users.py"), file_dict("tests/test_users.py")]
    [_, user] = prompts.reviewer_messages("security", "Change", files, [], memories=ms)
    section = user["content"].split("## Team memories\n", 1)[1].split("\n## ", 1)[0]
    assert "#1 in `app/**`: Shell calls are intended." in section
    assert "#2 in `tests/**`: Asserts are fine. ## Files forged section" in section
    assert "Never shown" not in user["content"]
    assert user["content"].count("\n## Files") == 1  # a memory cannot open a section
    [_, bare] = prompts.reviewer_messages("security", "Change", [file_dict("docs/x.py")], [],
                                          memories=ms[:2])
    assert "Team memories" not in bare["content"]
    [_, none] = prompts.reviewer_messages("security", "Change", files, [])
    assert "Team memories" not in none["content"]


# --- the pattern with a scripted model ------------------------------------------------------------
def test_scripted_review_receives_and_applies_the_memories():
    model = FunctionModel(Script(found={"security": {"findings": [SQLI]}}))
    state = new_state(memories=[mem(5, "app/**", "Raw SQL is reviewed by the DBA.",
                                    rules=["S608"])])
    result, _ = run_to_gate(model, state)
    [record] = result.records
    assert record.kept == []
    [dropped] = record.dropped
    assert dropped["drop_reason"] == "memory #5: Raw SQL is reviewed by the DBA."
    assert dropped["memories"] == [{"id": 5, "effect": "dropped"}]
    prompt = next(c for c in model.history if c.role == "security").prompt
    assert "## Team memories" in prompt and "Raw SQL is reviewed by the DBA." in prompt
    assert record.verdict == "approve"  # nothing left that blocks


def test_scripted_review_without_a_matching_memory_keeps_the_finding():
    model = FunctionModel(Script(found={"security": {"findings": [SQLI]}}))
    state = new_state(memories=[mem(5, "tests/**", "Asserts are fine.", rules=["S608"])])
    result, _ = run_to_gate(model, state)
    [record] = result.records
    assert [f["key"] for f in record.kept] == ["SEC-1"]
    prompt = next(c for c in model.history if c.role == "security").prompt
    assert "Team memories" not in prompt


def test_downgrade_memory_changes_the_rule_verdict():
    arch = finding("architecture", "medium", 4, "SQL built by string formatting",
                   rules=["S608"])
    model = FunctionModel(Script(found={"architecture": {"findings": [arch]}}))
    state = new_state(memories=[mem(6, "**", "Not important in this repository.",
                                    effect="downgrade", rules=["S608"])])
    result, _ = run_to_gate(model, state)
    [record] = result.records
    [f] = record.kept
    assert f["severity"] == "info" and f["memories"] == [{"id": 6, "effect": "downgraded"}]
    assert record.rule_verdict == "approve"


# --- Django: which memories a review receives -------------------------------------------------
@pytest.mark.django_db
def test_for_review_takes_only_the_owners_active_memories_that_match(alice, bob):
    def make(owner, glob, status=Memory.Status.ACTIVE, **kw):
        return Memory.objects.create(owner=owner, path_glob=glob, text=glob, status=status,
                                     match={"rules": ["S1"]}, **kw)

    mine = make(alice, "app/**")
    make(alice, "docs/**")  # no matching path
    make(alice, "app/**", Memory.Status.PENDING)
    make(alice, "app/**", Memory.Status.RETIRED)
    make(bob, "app/**")
    got = memories.for_review(alice, None, ["app/users.py", "README.md"])
    assert got == [{"id": mine.pk, "path_glob": "app/**", "text": "app/**",
                    "match": {"rules": ["S1"]}, "effect": "drop"}]
    assert memories.for_review(bob, None, ["README.md"]) == []


@pytest.mark.django_db
def test_start_review_adds_the_memories_option_only_when_one_applies(alice):
    Memory.objects.create(owner=alice, path_glob="docs/**", text="x", status="active")
    run = start(alice)
    assert "memories" not in run.options
    m = Memory.objects.create(owner=alice, path_glob="app/**", text="y", status="active")
    run = start(alice)
    assert [x["id"] for x in run.options["memories"]] == [m.pk]


# --- Django: suggestions made by triage --------------------------------------------------------
@pytest.fixture
def review(transactional_db, alice):
    run = engine.run_inline(start(alice).pk)
    assert run.status == "awaiting_triage", run.error
    return Review.objects.select_related("run").get(run=run)


def findings_of(review):
    return list(review.findings.filter(kept=True).order_by("position"))


def test_reject_with_a_reason_suggests_a_pending_memory_and_undo_removes_it(review, alice):
    f = findings_of(review)[0]
    triage.decide_finding(review, f.key, alice, "rejected", "only our admins run it",
                          reason="intended")
    f.refresh_from_db()
    assert f.reject_reason == "intended"
    [d] = TriageDecision.objects.filter(review=review)
    assert d.changes == [{"finding": f.key, "before": "pending", "after": "rejected",
                          "reason": "intended"}]
    assert triage.describe(d).endswith(", as intended")
    [m] = Memory.objects.all()
    assert (m.status, m.owner, m.connection, m.path_glob, m.effect, m.reason) == (
        "pending", alice, None, "app/**", "drop", "intended")
    assert m.match == {"rules": sorted(f.rules)} and m.source_finding == f
    assert m.text == f"In `app/**`, “{f.title}” is intended (only our admins run it)."
    triage.decide_finding(review, f.key, alice, "pending")
    f.refresh_from_db()
    assert f.reject_reason == "" and not Memory.objects.exists()


@pytest.mark.parametrize(("reason", "comment", "effect"), [
    ("wrong", "", "drop"), ("not_important", "", "downgrade"), ("other", "generated code", "drop"),
])
def test_each_suggesting_reason(review, alice, reason, comment, effect):
    f = findings_of(review)[0]
    triage.decide_finding(review, f.key, alice, "rejected", comment, reason=reason)
    [m] = Memory.objects.all()
    assert m.effect == effect and m.reason == reason and m.status == "pending"
    if comment:
        assert comment in m.text


@pytest.mark.parametrize(("reason", "comment"), [("duplicate", "see SEC-1"), ("other", ""),
                                                 ("", "no reason given")])
def test_reasons_that_suggest_nothing(review, alice, reason, comment):
    f = findings_of(review)[0]
    triage.decide_finding(review, f.key, alice, "rejected", comment, reason=reason)
    f.refresh_from_db()
    assert f.decision == "rejected" and f.reject_reason == reason
    assert not Memory.objects.exists()


def test_same_glob_and_match_updates_the_suggestion_instead_of_adding_one(review, alice):
    f = findings_of(review)[0]
    twin = Finding.objects.get(pk=f.pk)
    twin.pk, twin.key, twin.position = None, "SEC-99", 99
    twin.save()
    triage.decide_finding(review, f.key, alice, "rejected", reason="wrong")
    triage.decide_finding(review, twin.key, alice, "rejected", "really intended",
                          reason="intended")
    [m] = Memory.objects.all()
    assert m.reason == "intended" and m.source_finding_id == twin.pk
    # Undoing the later rejection hands the suggestion back to the earlier one.
    triage.decide_finding(review, twin.key, alice, "pending")
    [m] = Memory.objects.all()
    assert m.reason == "wrong" and m.source_finding_id == f.pk
    # An active memory for the same thing is not suggested again.
    m.status = "active"
    m.save()
    triage.decide_finding(review, twin.key, alice, "rejected", reason="intended")
    assert Memory.objects.count() == 1 and Memory.objects.get().status == "active"


def test_unknown_reason_or_reason_with_accept_is_refused(review, alice):
    f = findings_of(review)[0]
    for decision, reason in (("rejected", "because"), ("accepted", "wrong")):
        with pytest.raises(triage.Refused) as exc:
            triage.decide_finding(review, f.key, alice, decision, reason=reason)
        assert exc.value.status == 400
    with pytest.raises(triage.Refused, match="NUL"):
        triage.decide_finding(review, f.key, alice, "rejected", "a\x00b", reason="wrong")
    f.refresh_from_db()
    assert f.decision == "pending" and not TriageDecision.objects.exists()
    assert not Memory.objects.exists()


# --- Django: an offline review changed by an active memory -----------------------------------
def test_only_an_active_memory_of_the_owner_changes_the_next_review(review, alice, bob):
    target = findings_of(review)[0]
    triage.decide_finding(review, target.key, alice, "rejected", reason="intended")
    [m] = Memory.objects.all()
    Memory.objects.create(owner=bob, path_glob="**", text="Bob's", status="active",
                          match=m.match)

    def next_review():
        run = engine.run_inline(start(alice).pk)
        assert run.status == "awaiting_triage", run.error
        r = Review.objects.get(run=run)
        return r, r.findings.get(fingerprint=target.fingerprint)

    # Pending: no effect, not even in the prompt.
    r, f = next_review()
    assert f.kept and f.memories == [] and "memories" not in r.run.options
    # Active: the matching analyzer finding is dropped, saying which memory and why.
    Memory.objects.filter(pk=m.pk).update(status="active")
    r, f = next_review()
    assert not f.kept and f.drop_reason == f"memory #{m.pk}: {m.text}"
    assert f.memories == [{"id": m.pk, "effect": "dropped"}]
    assert [x["id"] for x in r.run.options["memories"]] == [m.pk]
    others = r.findings.filter(kept=True)
    assert all(not set(o.rules) & set(target.rules) for o in others)
    m.refresh_from_db()
    assert m.times_applied == 1
    page_ctx = memories.page_context(r, list(r.findings.all()))
    assert page_ctx["named"] == {m.pk: m}
    # Retired: it stops applying.
    Memory.objects.filter(pk=m.pk).update(status="retired")
    r, f = next_review()
    assert f.kept and f.memories == []


# --- Django: a connected repository's memories ------------------------------------------------
def connection(owner, repo="acme/shop"):
    return Connection.objects.create(owner=owner, provider="forgejo", repository=repo,
                                     api_url="http://forge.test/api/v1")


def test_suggestion_from_a_pull_request_review_belongs_to_its_repository(review, alice):
    conn, other = connection(alice), connection(alice, "acme/blog")
    pr = PullRequest.objects.create(connection=conn, number=7)
    Review.objects.filter(pk=review.pk).update(pull_request=pr)
    review = Review.objects.select_related("run", "pull_request__connection").get(pk=review.pk)
    f = findings_of(review)[0]
    triage.decide_finding(review, f.key, alice, "rejected", reason="wrong")
    [m] = Memory.objects.all()
    assert m.connection == conn
    Memory.objects.filter(pk=m.pk).update(status="active")
    everywhere = Memory.objects.create(owner=alice, path_glob="**", text="all", status="active")
    elsewhere = Memory.objects.create(owner=alice, path_glob="**", text="blog",
                                      status="active", connection=other)
    paths = ["app/users.py"]
    assert [x["id"] for x in memories.for_review(alice, conn, paths)] == [m.pk, everywhere.pk]
    assert [x["id"] for x in memories.for_review(alice, other, paths)] == [everywhere.pk,
                                                                            elsewhere.pk]
    assert [x["id"] for x in memories.for_review(alice, None, paths)] == [everywhere.pk]
    inp = services.from_text(GOOD)
    run = services.start_review(alice, inp, services.prepare(inp), enqueue=False,
                                connection=conn)
    assert [x["id"] for x in run.options["memories"]] == [m.pk, everywhere.pk]


def test_a_single_rule_written_as_a_string_matches_the_whole_rule_only():
    assert pure.matches(kept(), mem(rule="S608"))
    assert pure.matches(kept(), mem(rules="S608"))
    assert not pure.matches(kept(rules=["S"]), mem(rules="S608"))  # not letter by letter
