"""A webhook delivery to a review round (reviews_app/prflow): claiming, the pull request's row,
.quorum.toml from the base commit, full or incremental rounds, closed pull requests, provider
errors and daily limits, and findings carried between rounds through the real engine with the
offline model (ruff and bandit included: threads, hence transactional tests there).

The code host is ``tests/fake_host.FakeHost`` behind ``reviews_app.hosting.client_for``.
Until the hosts and hooks parts are merged, ``reviews_app.hosting.fetch.pull_input`` and
``reviews_app.connections.secrets.repo_ref`` get small stand-ins here (only when missing)."""

from __future__ import annotations

import importlib
import sys
import types

import pytest

from agents_app import engine
from agents_app.models import Run
from reviews_app import hosting, services, tasks
from reviews_app.hosting.base import SUMMARY_MARKER, HostError, RepoRef
from reviews_app.models import Connection, Finding, PullRequest, Review, WebhookDelivery
from reviews_app.prflow import handle_delivery
from tests.fake_host import FakeHost

BASE, HEAD, HEAD2 = "b" * 40, "1" * 40, "2" * 40
SQL = ["import sqlite3", "", "def find(db, uid):",
       '    return db.execute("select * from users where id = %s" % uid)', ""]
APP = "\n".join(SQL) + "\n"
CLEAN = APP.replace('"select * from users where id = %s" % uid', '"select * from users where id = ?", (uid,)')


# --- stand-ins for the parts merged later -------------------------------------------------------
def _stand_in_pull_input(client, number, *, head_sha, from_sha=None, max_bytes, max_files,
                         max_file_bytes):
    pr_files = client.pull_files(number)
    files = client.compare(from_sha, head_sha) if from_sha else pr_files
    ours = {f.path for f in pr_files}
    diff, contents = [], {}
    for f in files:
        if f.path not in ours:
            continue
        old = "/dev/null" if f.status == "added" else f"a/{f.path}"
        new = "/dev/null" if f.status == "removed" else f"b/{f.path}"
        diff.append(f"diff --git a/{f.path} b/{f.path}\n--- {old}\n+++ {new}\n{f.patch}")
        if f.status != "removed":
            data = client.file_bytes(head_sha, f.path, max_bytes=max_file_bytes)
            contents[f.path] = data.decode() if data is not None else None
    return types.SimpleNamespace(diff_text="".join(diff), contents=contents, coverage=[])


def _stand_in(name: str, **attrs):
    try:
        importlib.import_module(name)
        return None
    except ImportError:
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        return mod


@pytest.fixture
def host(monkeypatch):
    fake = FakeHost()
    monkeypatch.setattr(hosting, "client_for", lambda ref: fake, raising=False)
    if mod := _stand_in("reviews_app.hosting.fetch", pull_input=_stand_in_pull_input):
        monkeypatch.setitem(sys.modules, "reviews_app.hosting.fetch", mod)
    if _stand_in("reviews_app.connections.secrets") is not None:
        def repo_ref(conn):
            return RepoRef(conn.provider, conn.api_url, conn.repository, token="t0ken")
        pkg = types.ModuleType("reviews_app.connections")
        pkg.__path__ = []
        monkeypatch.setitem(sys.modules, "reviews_app.connections", pkg)
        monkeypatch.setitem(sys.modules, "reviews_app.connections.secrets",
                            types.SimpleNamespace(repo_ref=repo_ref))
    monkeypatch.setenv("QUORUM_TEST_HOST_TOKEN", "t0ken")
    monkeypatch.setattr(engine.scheduling, "schedule", lambda *a, **k: None)
    return fake


@pytest.fixture
def conn(alice):
    return Connection.objects.create(owner=alice, provider="github", repository="octo/demo",
                                     api_url="https://host.invalid",
                                     token_env="QUORUM_TEST_HOST_TOKEN")


_ids = iter(range(1, 10_000))


def deliver(conn, event="opened", number=7, head=HEAD, **kw):
    d = WebhookDelivery.objects.create(connection=conn, delivery_id=f"d-{next(_ids)}",
                                       event=event, number=number, head_sha=head, **kw)
    return d, handle_delivery(d.pk, enqueue=False)


def open_pull(host, base=None, head=None, **kw):
    base = base or {"README.md": "hi\n"}
    return host.set_pull(7, base=base, head=head or {**base, "app.py": APP},
                         base_sha=BASE, head_sha=HEAD, **kw)


# --- a full round -------------------------------------------------------------------------------
def test_an_opened_pull_request_starts_a_full_review_with_its_fields(db, host, conn, alice):
    open_pull(host, title="Add <b>lookup</b>")
    d, out = deliver(conn)
    assert out.status == "done" and out.run_id, out.detail
    review = Review.objects.get(run_id=out.run_id)
    pr = PullRequest.objects.get(connection=conn, number=7)
    assert (review.pull_request, review.pr_round, review.previous) == (pr, 1, None)
    assert (review.base_sha, review.head_sha, review.from_sha) == (BASE, HEAD, "")
    assert review.source_kind == "pull_request" and review.owner == alice
    assert review.source_label == "octo/demo#7: Add <b>lookup</b>"
    assert [f["path"] for f in review.files] == ["app.py"]
    assert review.repo_config["publish"]["policy"] is None and review.config_notes == []
    d.refresh_from_db()
    assert d.status == "done" and d.pull_request == pr and "Round 1 (full)" in d.detail
    assert pr.title == "Add <b>lookup</b>" and pr.head_sha == HEAD and pr.last_reviewed_sha == HEAD
    # The status comment: one, marked, its id kept for the summary.
    [c] = host.posted_comments
    assert SUMMARY_MARKER in c.body and pr.summary_comment_id == c.id
    # The config was read from the base commit only.
    assert "file_bytes" in host.calls


def test_no_status_comment_when_the_connection_says_so(db, host, conn):
    conn.status_comment = False
    conn.save()
    open_pull(host)
    deliver(conn)
    assert host.posted_comments == [] and Review.objects.count() == 1


def test_a_failing_status_comment_does_not_stop_the_review(db, host, conn):
    open_pull(host)
    host.fail_next("comments", HostError("Forbidden.", status=403))
    d, out = deliver(conn)
    assert out.status == "done" and Review.objects.count() == 1
    assert "status comment could not be posted (Forbidden.)" in out.detail


def test_a_redelivered_task_does_not_start_a_second_review(db, host, conn):
    open_pull(host)
    d, first = deliver(conn)
    second = handle_delivery(d.pk, enqueue=False)
    assert first.status == "done" and second.status == "skipped"
    assert Review.objects.count() == 1 and Run.objects.count() == 1
    # Another delivery for the same head: skipped as reviewed already.
    _, again = deliver(conn, event="synchronize")
    assert again.status == "done" and "reviewed already" in again.detail
    assert Review.objects.count() == 1


def test_a_delivery_being_worked_on_is_not_taken_twice(db, host, conn):
    open_pull(host)
    d = WebhookDelivery.objects.create(connection=conn, delivery_id="x", event="opened",
                                       number=7)
    from django.utils import timezone
    WebhookDelivery.objects.filter(pk=d.pk).update(
        detail="working since " + timezone.now().isoformat())
    assert handle_delivery(d.pk, enqueue=False).status == "skipped"
    assert Review.objects.count() == 0


# --- .quorum.toml -----------------------------------------------------------------------------
def test_the_head_config_is_ignored_for_the_base_one(db, host, conn):
    base = {"README.md": "hi\n", ".quorum.toml": '[review]\nexclude = ["docs/**"]\n'}
    head = {**base, "app.py": APP, "docs/a.md": "# doc\n",
            ".quorum.toml": '[review]\nexclude = ["**"]\n'}
    open_pull(host, base=base, head=head)
    _, out = deliver(conn)
    review = Review.objects.get(run_id=out.run_id)
    reviewed = {f["path"] for f in review.files}
    assert "app.py" in reviewed and ".quorum.toml" in reviewed  # the PR's own change is reviewed
    assert "docs/a.md" not in reviewed
    [excluded] = [c for c in review.coverage if c["reason"] == "excluded"]
    assert excluded["path"] == "docs/a.md" and excluded["reviewed"] is False
    assert "Excluded by .quorum.toml" in excluded["detail"]
    assert review.repo_config["review"]["exclude"] == ["docs/**"]


def test_a_broken_base_config_gives_defaults_and_notes_and_still_reviews(db, host, conn,
                                                                        settings):
    settings.QUORUM_REPO_MODELS = ["allowed/model"]
    toml = ('[review]\nlight = ["*.py"]\nbogus = 1\n[models]\nsecurity = "expensive/model"\n'
            'style = "allowed/model"\n[[rules]]\ntext = "No print calls"\n')
    open_pull(host, base={"README.md": "hi\n", ".quorum.toml": toml})
    _, out = deliver(conn)
    review = Review.objects.get(run_id=out.run_id)
    assert any("unknown key 'bogus'" in n for n in review.config_notes)
    assert any("'expensive/model' is not a model this server allows" in n
               for n in review.config_notes)
    assert review.run.models_used["style"] == "allowed/model"
    assert review.run.models_used["security"] == services.default_models()["security"]
    assert review.files[0]["mode"] == "light"
    opts = review.run.options
    assert opts["rules"] == [{"text": "No print calls", "scope": "repository",
                              "path_glob": "**", "severity": "medium"}]


@pytest.mark.parametrize("toml", [b"[review\n", b"\x00\x01", b"x" * 70_000])
def test_an_unreadable_config_never_stops_the_review(db, host, conn, toml):
    open_pull(host, base={"README.md": "hi\n", ".quorum.toml": toml.decode("latin-1")})
    _, out = deliver(conn)
    assert out.status == "done", out.detail
    review = Review.objects.get(run_id=out.run_id)
    assert len(review.config_notes) == 1 and "defaults apply" in review.config_notes[0]


def test_everything_excluded_reviews_nothing_and_says_so(db, host, conn):
    open_pull(host, base={"README.md": "hi\n", ".quorum.toml": '[review]\ninclude = ["lib/**"]\n'})
    d, out = deliver(conn)
    assert out.status == "done"
    assert out.detail == (f"Nothing reviewed at {HEAD[:12]}: every changed file (1) is excluded "
                          "by .quorum.toml (read from the base branch).")
    assert Review.objects.count() == 0
    d.refresh_from_db()
    assert d.status == "done" and d.pull_request is not None


# --- rounds -----------------------------------------------------------------------------------------
def synthesized(review: Review) -> None:
    Review.objects.filter(pk=review.pk).update(proposed_verdict="approve")


def test_a_new_push_after_a_synthesized_review_is_incremental(db, host, conn):
    open_pull(host)
    _, out = deliver(conn)
    first = Review.objects.get(run_id=out.run_id)
    synthesized(first)
    host.push(7, {"README.md": "hi\n", "app.py": APP, "b.py": "y = 2\n"}, HEAD2)
    _, out2 = deliver(conn, event="synchronize", head=HEAD2)
    second = Review.objects.get(run_id=out2.run_id)
    assert (second.pr_round, second.previous, second.from_sha, second.head_sha) == \
        (2, first, HEAD, HEAD2)
    assert [f["path"] for f in second.files] == ["b.py"]  # only what changed since round 1
    [rest] = [c for c in second.coverage if c["reason"] == "earlier_round"]
    assert f"reviewed in round 1 (review {first.run_id})" in rest["detail"]
    assert "compare" in host.calls
    assert second.run.options["pull_request"]["previous_round"] == 1


def test_a_push_with_no_change_to_the_pull_requests_files_reviews_nothing(db, host, conn):
    open_pull(host)
    _, out = deliver(conn)
    synthesized(Review.objects.get(run_id=out.run_id))
    host.push(7, {"README.md": "hi\n", "app.py": APP}, HEAD2)  # e.g. a merge of main, same tree
    d, out2 = deliver(conn, event="synchronize", head=HEAD2)
    assert out2.status == "done" and "no file of the pull request changed" in out2.detail
    assert Review.objects.count() == 1
    assert PullRequest.objects.get().last_reviewed_sha == HEAD2


def test_a_push_while_the_first_review_still_runs_is_full_and_supersedes_it(db, host, conn):
    open_pull(host)
    _, out = deliver(conn)
    host.push(7, {"README.md": "hi\n", "app.py": APP, "b.py": "y = 2\n"}, HEAD2)
    _, out2 = deliver(conn, event="synchronize", head=HEAD2)
    second = Review.objects.get(run_id=out2.run_id)
    assert second.from_sha == "" and second.previous is None and second.pr_round == 2
    assert Run.objects.get(pk=out.run_id).status == "cancelled"


def test_a_command_on_a_reviewed_head_reviews_it_again_in_full(db, host, conn):
    open_pull(host)
    _, out = deliver(conn)
    synthesized(Review.objects.get(run_id=out.run_id))
    _, again = deliver(conn, event="command")
    review = Review.objects.get(run_id=again.run_id)
    assert review.pr_round == 2 and review.from_sha == "" and review.previous.run_id == out.run_id


def test_closed_cancels_the_running_review_and_saves_the_state(db, host, conn):
    open_pull(host)
    _, out = deliver(conn)
    host.pulls[7].state = "merged"
    d, closed = deliver(conn, event="closed")
    assert closed.status == "done" and "merged" in closed.detail and "1 running" in closed.detail
    assert Run.objects.get(pk=out.run_id).status == "cancelled"
    assert PullRequest.objects.get(number=7).state == "merged"
    # A late "synchronize" for a closed pull request starts nothing.
    _, late = deliver(conn, event="synchronize")
    assert late.status == "done" and Review.objects.count() == 1


# --- errors and limits --------------------------------------------------------------------------------
def test_a_retryable_error_leaves_the_delivery_queued_then_succeeds(db, host, conn):
    open_pull(host)
    host.fail_next("pull", HostError("Rate limited.", status=429, retry_after=12,
                                     retryable=True))
    d, out = deliver(conn)
    assert out.status == "retry" and out.retry_in == 12
    d.refresh_from_db()
    assert d.status == "queued" and "trying again in 12 s" in d.detail
    assert Review.objects.count() == 0
    again = handle_delivery(d.pk, attempt=1, enqueue=False)
    assert again.status == "done" and Review.objects.count() == 1


def test_a_retryable_error_mid_round_saves_nothing(db, host, conn):
    open_pull(host)
    host.fail_next("pull_files", HostError("Bad gateway.", status=502, retryable=True))
    _, out = deliver(conn)
    assert out.status == "retry" and out.retry_in == 30  # no Retry-After: the first backoff
    assert PullRequest.objects.count() == 0 and Review.objects.count() == 0


def test_the_last_attempt_fails_with_the_message(db, host, conn):
    open_pull(host)
    host.fail_next("pull", HostError("Bad gateway.", status=502, retryable=True))
    d = WebhookDelivery.objects.create(connection=conn, delivery_id="z", event="opened",
                                       number=7)
    out = handle_delivery(d.pk, attempt=5, max_attempts=5, enqueue=False)
    d.refresh_from_db()
    assert out.status == "failed" and d.status == "failed" and "Bad gateway." in d.detail


@pytest.mark.parametrize("status", [401, 404, 422])
def test_a_refusal_fails_the_delivery_with_the_plain_message(db, host, conn, status):
    open_pull(host)
    host.fail_next("pull", HostError(f"Refused ({status}).", status=status))
    d, out = deliver(conn)
    d.refresh_from_db()
    assert out.status == "failed" and d.status == "failed"
    assert d.detail == f"The provider refused: Refused ({status})."
    assert "t0ken" not in d.detail and PullRequest.objects.count() == 0


def test_the_daily_limit_fails_the_delivery_and_saves_nothing(db, host, conn, settings):
    settings.QUORUM_REVIEW_DAILY_LIMIT = 1
    open_pull(host)
    deliver(conn)
    host.push(7, {"README.md": "hi\n", "app.py": APP, "b.py": "y = 2\n"}, HEAD2)
    d, out = deliver(conn, event="synchronize", head=HEAD2)
    d.refresh_from_db()
    assert out.status == "failed" and "daily limit of 1 reviews" in d.detail
    assert Review.objects.count() == 1 and PullRequest.objects.get().head_sha == HEAD


def test_unknown_events_and_inactive_connections_do_nothing(db, host, conn):
    open_pull(host)
    _, out = deliver(conn, event="labeled")
    assert out.status == "done" and "not acted on" in out.detail
    conn.active = False
    conn.save()
    _, off = deliver(conn)
    assert "turned off" in off.detail and Review.objects.count() == 0 and host.calls == []


def test_the_task_retries_with_the_countdown(db, host, conn, monkeypatch):
    open_pull(host)
    host.fail_next("pull", HostError("Slow down.", status=429, retry_after=7, retryable=True))
    d = WebhookDelivery.objects.create(connection=conn, delivery_id="t", event="opened",
                                       number=7)
    asked = {}

    def retry(**kw):
        asked.update(kw)
        return RuntimeError("retry")

    monkeypatch.setattr(tasks.handle_delivery, "retry", retry)
    with pytest.raises(RuntimeError):
        tasks.handle_delivery.run(d.pk)
    assert asked == {"countdown": 7.0}
    assert tasks.handle_delivery.run(d.pk) == "done"
    assert tasks.handle_delivery.name == "reviews_app.tasks.handle_delivery"


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
    from reviews_app import triage

    open_pull(host)
    first = run_round(conn)
    old = sql_finding(first)
    triage.decide_finding(first, old.key, alice, "rejected", "a test fixture")
    Finding.objects.filter(pk=old.pk).update(reject_reason="intended")
    again = run_round(conn, event="command")  # the same code, reviewed in full again
    [gone] = again.findings.filter(fingerprint=old.fingerprint)
    assert gone.kept is False
    assert gone.drop_reason.startswith(f"rejected by a person in review {first.run_id} (intended")
    changed = APP.replace("%s\" % uid", "%s\" % (uid,)")
    host.push(7, {"README.md": "hi\n", "app.py": changed}, HEAD2)
    third = run_round(conn, event="synchronize", head=HEAD2)
    new = sql_finding(third)
    assert new.fingerprint != old.fingerprint and new.kept


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
