"""Reject reasons on the review page and the memories page: one-click reasons (htmx and plain
posts), bad input refused with a clear message and nothing saved, the suggestion notice on
the card, cards naming the memory that changed a finding; the memories page's groups,
approve / edit / retire / restore, access (owner, another user, anonymous), CSRF and bad
input."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from agents_app import engine
from reviews_app.models import Memory, Review, TriageDecision
from tests.test_memories import findings_of, review  # noqa: F401 - the fixture
from tests.test_review_views import start

HTMX = {"HTTP_HX_REQUEST": "true"}


def decide(client, review, key, data, htmx=True):  # noqa: F811
    return client.post(reverse("finding_decision", args=[review.run_id, key]), data,
                       **(HTMX if htmx else {}))


def nothing_saved(review):  # noqa: F811
    assert not TriageDecision.objects.filter(review=review).exists()
    assert not Memory.objects.exists()
    assert all(f.decision == "pending" and f.reject_reason == "" for f in findings_of(review))


# --- reject reasons on the review page ----------------------------------------------------------
def test_card_offers_the_reasons_as_buttons(alice_client, review):  # noqa: F811
    html = alice_client.get(reverse("review_detail", args=[review.run_id])).content.decode()
    key = findings_of(review)[0].key
    card = html[html.index(f'id="finding-{key}"'):]
    card = card[:card.index("</li>")]
    assert 'name="decision" value="rejected"' in card  # plain Reject stays one click
    for value in ("wrong", "not_important", "intended", "duplicate", "other"):
        assert f'name="reason" value="{value}"' in card
    assert "Not important here" in card
    assert reverse("memory_list") in html  # the nav link


def test_reason_button_rejects_and_suggests_a_memory(alice_client, alice, review):  # noqa: F811
    f = findings_of(review)[0]
    r = decide(alice_client, review, f.key, {"reason": "intended", "comment": "admin only",
                                              "seen": "pending"})
    assert r.status_code == 200
    html = r.content.decode()
    f.refresh_from_db()
    assert (f.decision, f.reject_reason, f.comment, f.decided_by) == (
        "rejected", "intended", "admin only", alice)
    [m] = Memory.objects.all()
    assert "Rejected</span> as <span class=\"reject-reason\">intended</span>" in html
    assert "1 memory suggested from this review" in html
    assert f'{reverse("memory_list")}#memory-{m.pk}' in html
    assert 'id="history-panel" hx-swap-oob="true"' in html and "as intended" in html
    # Undo clears the reason and withdraws the suggestion.
    r = decide(alice_client, review, f.key, {"decision": "pending", "seen": "rejected"})
    assert r.status_code == 200 and "memory suggested" not in r.content.decode()
    f.refresh_from_db()
    assert f.decision == "pending" and f.reject_reason == "" and not Memory.objects.exists()


def test_reason_works_without_javascript(alice_client, review):  # noqa: F811
    f = findings_of(review)[0]
    r = decide(alice_client, review, f.key, {"reason": "wrong"}, htmx=False)
    assert r.status_code == 302 and r["Location"].endswith(f"#finding-{f.key}")
    f.refresh_from_db()
    assert f.reject_reason == "wrong" and Memory.objects.get().reason == "wrong"
    page = alice_client.get(reverse("review_detail", args=[review.run_id])).content.decode()
    assert "1 memory suggested from this review" in page


@pytest.mark.parametrize(("data", "words"), [
    ({"reason": "because"}, "the reason is not one of"),
    ({"decision": "rejected", "reason": "x" * 5000}, "the reason is not one of"),
    ({"decision": "accepted", "reason": "wrong"}, "That reason could not be read"),
    ({"reason": "intended", "comment": "ok\x00no"}, "NUL byte"),
    ({"reason": "other", "comment": "x" * 4001}, "too long"),
    ({}, "accept or reject the finding"),
])
def test_bad_reasons_are_refused_clearly_and_save_nothing(alice_client, review, data, words):  # noqa: F811
    f = findings_of(review)[0]
    for htmx in (True, False):
        r = decide(alice_client, review, f.key, data, htmx=htmx)
        assert r.status_code == 400 and words in r.content.decode()
    nothing_saved(review)


def test_duplicate_reason_and_resubmit(alice_client, review):  # noqa: F811
    f = findings_of(review)[0]
    data = {"reason": "duplicate", "seen": "pending"}
    assert decide(alice_client, review, f.key, data).status_code == 200
    again = decide(alice_client, review, f.key, data)  # the same click twice: a stale page
    assert again.status_code == 409 and "since this page was loaded" in again.content.decode()
    assert not Memory.objects.exists()
    assert TriageDecision.objects.filter(review=review).count() == 1


def test_another_user_cannot_reject_with_a_reason(bob_client, review):  # noqa: F811
    f = findings_of(review)[0]
    assert decide(bob_client, review, f.key, {"reason": "wrong"}).status_code == 404
    nothing_saved(review)


# --- the memories page ---------------------------------------------------------------------------
@pytest.fixture
def memory(db, alice):
    return Memory.objects.create(owner=alice, path_glob="tests/**", text="Asserts are fine.",
                                 match={"rules": ["S101"]}, reason="intended")


ACTIONS = ("memory_approve", "memory_retire", "memory_restore", "memory_edit")


def snapshot(m):
    m = Memory.objects.get(pk=m.pk)
    return (m.status, m.text, m.path_glob, m.effect, m.decided_by_id, m.decided_at)


def test_anonymous_is_sent_to_sign_in(client, memory):
    r = client.get(reverse("memory_list"))
    assert r.status_code == 302 and r["Location"].startswith(reverse("login"))
    before = snapshot(memory)
    for name in ACTIONS:
        r = client.post(reverse(name, args=[memory.pk]), {"text": "x", "path_glob": "**",
                                                          "effect": "drop"})
        assert r.status_code == 302 and r["Location"].startswith(reverse("login")), name
    assert snapshot(memory) == before


def test_another_user_gets_404_and_does_not_see_it(bob_client, memory):
    page = bob_client.get(reverse("memory_list")).content.decode()
    assert "Asserts are fine." not in page and "No suggestion waiting" in page
    before = snapshot(memory)
    for name in ACTIONS:
        r = bob_client.post(reverse(name, args=[memory.pk]), {"text": "x", "path_glob": "**",
                                                              "effect": "drop"}, **HTMX)
        assert r.status_code == 404, name
    assert snapshot(memory) == before
    assert bob_client.post(reverse("memory_approve", args=[2**63 - 1])).status_code == 404


def test_get_on_an_action_is_refused(alice_client, memory):
    assert alice_client.get(reverse("memory_approve", args=[memory.pk])).status_code == 405
    assert Memory.objects.get(pk=memory.pk).status == "pending"


def test_page_groups_and_the_life_of_a_memory(alice_client, alice, memory):
    page = alice_client.get(reverse("memory_list")).content.decode()
    pending = page[page.index('id="memories-pending"'):page.index('id="memories-active"')]
    assert f'id="memory-{memory.pk}"' in pending and "Asserts are fine." in pending
    assert "from a rejection as intended" in pending and "Matches rule S101" in pending

    r = alice_client.post(reverse("memory_approve", args=[memory.pk]), **HTMX)
    assert r.status_code == 200 and "approved" in r.content.decode()
    memory.refresh_from_db()
    assert memory.status == "active" and memory.decided_by == alice and memory.decided_at
    again = alice_client.post(reverse("memory_approve", args=[memory.pk]), **HTMX)
    assert again.status_code == 200 and "already" in again.content.decode()
    page = alice_client.get(reverse("memory_list")).content.decode()
    active = page[page.index('id="memories-active"'):page.index('id="memories-retired"')]
    assert f'id="memory-{memory.pk}"' in active

    r = alice_client.post(reverse("memory_retire", args=[memory.pk]))  # plain post
    assert r.status_code == 302 and r["Location"].endswith(f"#memory-{memory.pk}")
    assert Memory.objects.get(pk=memory.pk).status == "retired"
    refused = alice_client.post(reverse("memory_approve", args=[memory.pk]), **HTMX)
    assert refused.status_code == 409 and "cannot be approved" in refused.content.decode()
    r = alice_client.post(reverse("memory_restore", args=[memory.pk]), **HTMX)
    assert r.status_code == 200 and Memory.objects.get(pk=memory.pk).status == "active"


def test_edit_saves_text_glob_and_effect(alice_client, memory):
    r = alice_client.post(reverse("memory_edit", args=[memory.pk]), {
        "text": "  In tests, asserts are fine.  ", "path_glob": "**/tests/**",
        "effect": "downgrade"}, **HTMX)
    assert r.status_code == 200 and "saved" in r.content.decode()
    memory.refresh_from_db()
    assert (memory.text, memory.path_glob, memory.effect, memory.status) == (
        "In tests, asserts are fine.", "**/tests/**", "downgrade", "pending")


@pytest.mark.parametrize(("data", "words"), [
    ({"text": "", "path_glob": "tests/**", "effect": "drop"}, "Write the memory"),
    ({"text": "a\x00b", "path_glob": "tests/**", "effect": "drop"}, "NUL byte"),
    ({"text": "x" * 1001, "path_glob": "tests/**", "effect": "drop"}, "under 1,000"),
    ({"text": "ok", "path_glob": "", "effect": "drop"}, "Give a path glob"),
    ({"text": "ok", "path_glob": "tests/\x00/**", "effect": "drop"}, "NUL byte"),
    ({"text": "ok", "path_glob": "../secrets/**", "effect": "drop"}, ". or .. folders"),
    ({"text": "ok", "path_glob": "/etc/**", "effect": "drop"}, "no leading /"),
    ({"text": "ok", "path_glob": "x" * 301, "effect": "drop"}, "under 300"),
    ({"text": "ok", "path_glob": "tests/**", "effect": "explode"}, "drop or downgrade"),
])
def test_bad_edits_are_refused_clearly_and_change_nothing(alice_client, memory, data, words):
    before = snapshot(memory)
    for htmx in (True, False):
        r = alice_client.post(reverse("memory_edit", args=[memory.pk]), data,
                              **(HTMX if htmx else {}))
        html = r.content.decode()
        assert r.status_code == 400 and words in html and "was not changed" in html
    assert snapshot(memory) == before


def test_edit_refuses_a_duplicate_of_another_memory(alice_client, alice, memory):
    other = Memory.objects.create(owner=alice, path_glob="src/**", text="Same rule elsewhere.",
                                  match=memory.match, status="active")
    before = snapshot(other)
    r = alice_client.post(reverse("memory_edit", args=[other.pk]), {
        "text": "x", "path_glob": "tests/**", "effect": "drop"}, **HTMX)
    assert r.status_code == 400 and f"Memory #{memory.pk} already says this" in \
        r.content.decode()
    assert snapshot(other) == before


def test_csrf_is_required(alice, memory):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    for name in ACTIONS:
        r = client.post(reverse(name, args=[memory.pk]), {"text": "x", "path_glob": "**",
                                                          "effect": "drop"})
        assert r.status_code == 403, name
    assert Memory.objects.get(pk=memory.pk).status == "pending"
    page = client.get(reverse("memory_list")).content.decode()
    assert page.count('name="csrfmiddlewaretoken"') >= 3  # approve, retire, edit


# --- cards name the memory that changed a finding -------------------------------------------
def test_dropped_and_downgraded_findings_name_their_memory(alice_client, alice, review):  # noqa: F811
    first, second = findings_of(review)[:2]
    assert first.rules and second.rules and not set(first.rules) & set(second.rules)
    assert second.severity != "info"
    drop = Memory.objects.create(owner=alice, path_glob="app/**", text="Reviewed by the DBA.",
                                 match={"rules": first.rules}, status="active")
    down = Memory.objects.create(owner=alice, path_glob="**", text="Minor in this repo.",
                                 match={"rules": second.rules}, status="active",
                                 effect="downgrade")
    run = engine.run_inline(start(alice).pk)
    r = Review.objects.get(run=run)
    page = alice_client.get(reverse("review_detail", args=[run.pk])).content.decode()
    dropped = page[page.index('class="dropped"'):]
    assert f"memory #{drop.pk}: Reviewed by the DBA." in dropped
    assert f'href="{reverse("memory_list")}#memory-{drop.pk}"' in dropped
    downgraded = r.findings.get(kept=True, fingerprint=second.fingerprint)
    assert downgraded.severity == "info"
    card = page[page.index(f'id="finding-{downgraded.key}"'):]
    card = card[:card.index("</li>")]
    assert f"Downgraded by <a href=\"{reverse('memory_list')}#memory-{down.pk}\">" in card
    assert "Minor in this repo." in card
