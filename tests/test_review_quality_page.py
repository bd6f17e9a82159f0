"""The quality stages on the review page: the per-stage summary, the severity rubric, each
finding's kind, further locations and trail (kept / corrected from → to / severity changed /
discarded, with reasons), all escaped. Reviews run through the real engine with the offline
model (hence transactional tests)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from agents_app import engine
from reviews_app import services
from reviews_app.models import Finding
from tests.review_corpus import GOOD


@pytest.fixture
def triage_run(transactional_db, alice):
    inp = services.from_text(GOOD)
    run = engine.run_inline(services.start_review(alice, inp, services.prepare(inp),
                                                  enqueue=False).pk)
    assert run.status == "awaiting_triage", run.error
    return run


def page(client, run) -> str:
    response = client.get(reverse("review_detail", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_an_offline_review_shows_what_the_safeguard_did_and_the_rubric(alice_client,
                                                                       triage_run):
    kept = list(Finding.objects.filter(review__run=triage_run, kept=True))
    assert kept and all(f.kind in ("security", "bug", "style", "maintainability")
                        for f in kept)
    assert all(f.quality and f.quality[0]["stage"] == "safeguard" for f in kept)
    html = page(alice_client, triage_run)
    # The safeguard kept every finding; a later stage may drop one (a format nit folded into
    # the injection it would keep), and the safeguard's count still includes it.
    checked = [f for f in Finding.objects.filter(review__run=triage_run)
               if any(q.get("stage") == "safeguard" and q.get("action") == "keep"
                      for q in f.quality)]
    assert len(checked) == len(kept) + sum(not f.kept for f in checked)
    assert f"Safeguard: {len(checked)} kept, 0 corrected, 0 discarded" in html
    assert "Style fixes that keep an injection: 1 folded into the security finding" in html
    assert "How severity is assigned" in html and "hard-coded password" in html
    assert '<span class="badge kind kind-security"' in html
    assert "Safeguard kept it" in html and "offline stand-in" in html


def test_the_trail_shows_corrections_severity_locations_and_discards_escaped(alice_client,
                                                                            triage_run):
    f = Finding.objects.filter(review__run=triage_run, kept=True).order_by("position").first()
    other = Finding.objects.filter(review__run=triage_run).exclude(pk=f.pk).first()
    f.quality = [
        {"stage": "safeguard", "action": "correct", "reason": "<b>moved</b> one line",
         "before": {"line": 4, "title": "<script>alert(1)</script>"},
         "after": {"line": f.line, "title": f.title}},
        {"stage": "severity", "action": "change", "reason": "by the rubric",
         "before": {"severity": "medium"}, "after": {"severity": f.severity}},
        {"stage": "cluster", "action": "cluster", "reason": "3 findings of the same problem",
         "before": {"locations": 1}, "after": {"locations": 3}}]
    f.locations = [{"file": f.file, "line": f.line, "end_line": f.end_line, "key": f.key},
                   {"file": f.file, "line": 1, "end_line": None, "key": "X-2"},
                   {"file": "elsewhere/<evil>.py", "line": 7, "end_line": 9, "key": "X-3"}]
    f.save()
    other.kept = False
    other.drop_reason = "Safeguard: <i>not</i> reachable"
    other.quality = [{"stage": "safeguard", "action": "discard",
                      "reason": "<i>not</i> reachable"}]
    other.save()
    html = page(alice_client, triage_run)
    assert "Safeguard corrected it" in html and "<del>4</del> → <ins>" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    assert "&lt;b&gt;moved&lt;/b&gt;" in html
    assert "Severity changed" in html and "<del>medium</del>" in html
    assert "Also at 2 other places" in html
    assert f'href="#f0-L1">{f.file}:1</a>' in html
    assert "elsewhere/&lt;evil&gt;.py:7-9" in html  # not in the change: no link, escaped
    assert "Safeguard discarded it" in html and "Safeguard: &lt;i&gt;not&lt;/i&gt; reachable" \
        in html
    assert "Clustering: 0 repeat(s) folded into 1 finding(s)" in html


def test_the_trail_is_only_for_the_owner(bob_client, triage_run):
    url = reverse("review_detail", args=[triage_run.pk])
    assert bob_client.get(url).status_code == 404
    response = Client().get(url)
    assert response.status_code == 302 and reverse("login") in response["Location"]
