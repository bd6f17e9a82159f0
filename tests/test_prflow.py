"""A webhook delivery to a review round (reviews_app/prflow): claiming, the pull request's row,
.quorum.toml from the base commit, full or incremental rounds, closed pull requests, provider
errors, daily limits and the task. The code host is ``tests/fake_host.FakeHost``
(``tests/prflow_support.py``)."""

from __future__ import annotations

import pytest

from agents_app.models import Run
from reviews_app import services, tasks
from reviews_app.hosting.base import SUMMARY_MARKER, HostError
from reviews_app.models import PullRequest, Review, WebhookDelivery
from reviews_app.prflow import handle_delivery
from tests import prflow_support as support
from tests.prflow_support import APP, BASE, HEAD, HEAD2, deliver, open_pull

host, conn = support.host, support.conn  # the fixtures


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


def test_no_status_comment_when_nothing_is_to_be_published(db, host, conn):
    """Under the "never" policy nothing is written on the pull request: a status comment
    would also replace the last published summary with a promise of another."""
    conn.publish_policy = "never"
    conn.save()
    open_pull(host)
    _, out = deliver(conn)
    assert out.run_id and host.posted_comments == []


def test_the_status_comment_says_what_the_policy_will_do(db, host, conn):
    conn.publish_policy = "automatic"
    conn.save()
    open_pull(host)
    deliver(conn)
    [c] = host.posted_comments
    assert "published here when it is done" in c.body and "triages" not in c.body


def test_closing_before_publication_says_the_review_stopped(db, host, conn):
    open_pull(host)
    deliver(conn)
    [status] = host.posted_comments
    assert "is reviewing" in status.body
    host.pulls[7].state = "closed"
    _, closed = deliver(conn, event="closed")
    assert "status comment says the review stopped" in closed.detail
    [c] = host.posted_comments
    assert c.id == status.id and "stopped: the pull request was closed" in c.body
    assert SUMMARY_MARKER in c.body


def test_closing_leaves_a_published_summary_as_it_is(db, host, conn):
    open_pull(host)
    deliver(conn)
    [c] = host.posted_comments
    c.body = SUMMARY_MARKER + "\n**Quorum review**: request changes."  # what publishing writes
    host.pulls[7].state = "merged"
    _, closed = deliver(conn, event="closed")
    assert "stopped" not in closed.detail
    assert host.posted_comments[0].body.endswith("request changes.")


def test_a_failing_status_comment_does_not_stop_the_review(db, host, conn):
    open_pull(host)
    host.fail_next("comments", HostError("Forbidden.", status=403))
    d, out = deliver(conn)
    assert out.status == "done" and Review.objects.count() == 1
    assert "status comment could not be written (Forbidden.)" in out.detail


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


def test_a_command_on_a_reviewed_head_points_to_its_review(db, host, conn):
    open_pull(host)
    _, out = deliver(conn)
    synthesized(Review.objects.get(run_id=out.run_id))
    for _ in range(3):  # asked again and again: still one review, no new round
        _, again = deliver(conn, event="command", sender="carol")
        assert again.status == "done" and again.run_id == out.run_id
        assert "reviewed already in round 1" in again.detail and "fresh" in again.detail
    assert Review.objects.count() == 1
    [summary] = host.posted_comments  # the pointer is a line on top of the one summary
    assert "was reviewed already in round 1" in summary.body and "`carol`" in summary.body


def test_a_fresh_command_reviews_a_reviewed_head_again_in_full(db, host, conn):
    open_pull(host)
    _, out = deliver(conn)
    synthesized(Review.objects.get(run_id=out.run_id))
    _, again = deliver(conn, event="command", fresh=True)
    review = Review.objects.get(run_id=again.run_id)
    assert review.pr_round == 2 and review.from_sha == "" and review.previous.run_id == out.run_id
    assert "full, as asked" in again.detail


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


def test_a_late_closed_delivery_for_a_reopened_pull_request_ends_nothing(db, host, conn):
    open_pull(host)
    _, out = deliver(conn)
    _, closed = deliver(conn, event="closed")  # the provider says it is open (reopened since)
    assert closed.status == "done" and "open again" in closed.detail
    assert Run.objects.get(pk=out.run_id).status == "queued"


def test_a_connection_without_its_token_fails_the_delivery(db, host, conn, monkeypatch):
    monkeypatch.delenv("QUORUM_CONN_TEST_HOST_TOKEN")
    d, out = deliver(conn)
    d.refresh_from_db()
    assert d.status == "failed"
    assert "QUORUM_CONN_TEST_HOST_TOKEN (the token of connection" in d.detail


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
