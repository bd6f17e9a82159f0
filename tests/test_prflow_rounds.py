"""Findings between rounds of a pull request through the real engine with the offline model
(ruff and bandit included: threads, hence transactional tests), and the review page's
pull-request partial."""

from __future__ import annotations

import json

from agents_app import engine
from reviews_app.models import Finding, PullRequest, Review
from tests import prflow_support as support
from tests.prflow_support import APP, CLEAN, HEAD, HEAD2, deliver, open_pull

host, conn = support.host, support.conn  # the fixtures


# --- findings between rounds, through the engine and the offline model ---------------------------------
def run_round(conn, **kw) -> Review:
    _, out = deliver(conn, **kw)
    assert out.run_id, out.detail
    run = engine.run_inline(out.run_id)
    assert run.status == "awaiting_triage", run.error
    return Review.objects.get(run=run)


def sql_finding(review: Review) -> Finding:
    [f] = [f for f in review.findings.filter(kept=True) if "B608" in f.rules]
    return f


def test_a_fixed_finding_is_resolved_in_the_next_round(transactional_db, host, conn):
    open_pull(host)
    first = run_round(conn)
    old = sql_finding(first)
    host.push(7, {"README.md": "hi\n", "app.py": CLEAN}, HEAD2)
    second = run_round(conn, event="synchronize", head=HEAD2)
    assert second.from_sha == HEAD
    [done] = second.findings.filter(carried_from=f"{first.run_id}:{old.key}")
    assert done.kept is False and done.resolution == "implemented"
    assert done.drop_reason == f"resolved in {HEAD2[:12]}: implemented"
    assert any("offline model: kept the mechanical comparison" in h for h in done.history)


def test_an_untouched_finding_is_carried_open(transactional_db, host, conn):
    open_pull(host)
    first = run_round(conn)
    old = sql_finding(first)
    host.push(7, {"README.md": "hi\n", "app.py": APP, "b.py": "y = 2\n"}, HEAD2)
    second = run_round(conn, event="synchronize", head=HEAD2)
    [carried] = second.findings.filter(carried_from=f"{first.run_id}:{old.key}")
    assert carried.kept and carried.resolution == "" and carried.fingerprint == old.fingerprint
    assert second.proposed_verdict == first.proposed_verdict  # it still counts


def test_a_rejected_finding_is_not_raised_again_unless_its_code_changes(transactional_db, host,
                                                                        conn, alice):
    from reviews_app.triage import service as triage

    open_pull(host)
    first = run_round(conn)
    old = sql_finding(first)
    triage.decide_finding(first, old.key, alice, "rejected", "a test fixture")
    Finding.objects.filter(pk=old.pk).update(reject_reason="intended")
    again = run_round(conn, event="command", fresh=True)  # the same code, in full again
    [gone] = again.findings.filter(fingerprint=old.fingerprint)
    assert gone.kept is False
    assert gone.drop_reason.startswith(f"rejected by a person in review {first.run_id} (intended")
    changed = APP.replace("%s\" % uid", "%s\" % (uid,)")
    host.push(7, {"README.md": "hi\n", "app.py": changed}, HEAD2)
    third = run_round(conn, event="synchronize", head=HEAD2)
    new = sql_finding(third)
    assert new.fingerprint != old.fingerprint and new.kept


def test_the_scripted_models_check_decides_the_resolution(transactional_db, host, conn,
                                                          scripted, settings):
    settings.QUORUM_REPO_MODELS = ["scripted/main"]
    base = {"README.md": "hi\n", ".quorum.toml": '[models]\nsynthesizer = "scripted/main"\n'}
    open_pull(host, base=base, head={**base, "app.py": APP})
    asked = []

    def fn(messages, info):
        if info.schema != "ImplementedCheck":
            return scripted.offline_like(messages, info)
        [text] = [m["content"] for m in messages if "## Suggestions to check" in m["content"]]
        body = text.split("```json\n", 1)[1].rsplit("\n```", 1)[0]
        items = json.loads(body)
        asked.extend(items)
        return {"items": [{"key": i["key"], "status": "partially",
                           "reason": "parameterised, but the helper still builds SQL"}
                          for i in items]}

    scripted.fn = fn
    first = run_round(conn)
    assert first.run.models_used["synthesizer"] == "scripted/main"
    old = sql_finding(first)
    host.push(7, {**base, "app.py": CLEAN}, HEAD2)
    second = run_round(conn, event="synchronize", head=HEAD2)
    [c] = second.findings.filter(carried_from=f"{first.run_id}:{old.key}")
    assert c.kept and c.resolution == "partially"
    assert c.history[-1] == (f"checked against {HEAD2[:12]}: partially (parameterised, but the "
                             "helper still builds SQL)")
    # B608 pointed at the changed line (UP031 there was folded into it: a format nit whose
    # fix keeps the injection is no finding of its own), and one call asks about it.
    assert [i["guess"] for i in asked] == ["implemented"]
    assert all("(uid,)" in i["code_now"] for i in asked)


# --- the review page ---------------------------------------------------------------------------------
def test_the_page_shows_the_pull_request_escaped(db, host, conn, alice_client):
    evil = "<script>alert(1)</script>"
    toml = f'[review]\n"{evil}" = 1\n'
    open_pull(host, base={"README.md": "hi\n", ".quorum.toml": toml}, title=evil)
    _, out = deliver(conn)
    review = Review.objects.get(run_id=out.run_id)
    page = alice_client.get(review.get_absolute_url()).content.decode()
    assert evil not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "GitHub" in page and "octo/demo" in page and "Round 1" in page
    assert 'href="https://host.invalid/pull/7"' in page and "pull request #7" in page
    assert f"<code title=\"{HEAD}\">{HEAD[:7]}</code>" in page
    assert ".quorum.toml</code>: 1 problem" in page and "unknown key" in page
    # Only an http(s) address becomes a link.
    PullRequest.objects.filter(number=7).update(url="javascript:alert(1)")
    page = alice_client.get(review.get_absolute_url()).content.decode()
    assert "javascript:alert" not in page and "pull request #7" in page


def test_the_page_of_an_incremental_round_shows_the_range_and_carried_findings(
        db, host, conn, alice_client):
    open_pull(host)
    _, out = deliver(conn)
    first = Review.objects.get(run_id=out.run_id)
    Review.objects.filter(pk=first.pk).update(proposed_verdict="approve", pr_round=1)
    host.push(7, {"README.md": "hi\n", "app.py": APP, "b.py": "y = 2\n"}, HEAD2)
    _, out2 = deliver(conn, event="synchronize", head=HEAD2)
    second = Review.objects.get(run_id=out2.run_id)
    Review.objects.filter(pk=second.pk).update(proposed_verdict="request_changes")
    Finding.objects.create(review=second, key="SEC-2", category="security", severity="high",
                           file="app.py", line=4, title="SQL injection", reviewer="security",
                           carried_from=f"{first.run_id}:SEC-1", resolution="partially")
    page = alice_client.get(second.get_absolute_url()).content.decode()
    assert f"{HEAD[:7]}</code>..<code title=\"{HEAD2}\">{HEAD2[:7]}</code>" in page
    assert "the rest was reviewed in" in page and "round 1</a>" in page
    assert "carried from round 1" in page and "partially implemented" in page


def test_a_pull_request_review_page_is_the_owners_only(db, host, conn, client, bob):
    open_pull(host, title="secret plans")
    _, out = deliver(conn)
    url = Review.objects.get(run_id=out.run_id).get_absolute_url()
    anon = client.get(url)
    assert anon.status_code == 302 and "/login" in anon["Location"]
    client.force_login(bob)
    other = client.get(url)
    assert other.status_code == 404 and b"secret plans" not in other.content
