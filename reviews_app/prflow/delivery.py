"""Acting on one webhook delivery: from "a pull request changed" to a review round started (or
ended, or skipped), saying on the delivery what happened.

No provider call is made inside a database transaction (common/netguard.py checks it): the
pull request, its ``.quorum.toml`` and its diff are fetched first, then the round is claimed
and written in one short transaction under the pull request's row lock, which checks again
that nothing started a round of the same head meanwhile (and fetches again when an earlier
round finished in between). On the default SQLite a transaction holds the one write lock, so
a fetch inside one would make every other delivery and every triage click wait for it.

The delivery is claimed first (still queued and not being worked on), so a redelivered task
finds it claimed or done and starts nothing. A retryable provider error leaves the delivery
queued for the task's next attempt (nothing saved); any other error fails it with the plain
message.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from agents_app import engine
from agents_app.models import TERMINAL, Run
from agents_app.models import Status as RunStatus

from .. import services
from ..hosting.base import HostClient, HostError, PullInfo, retry_wait
from ..hosting.fetch import FULL_ROUND, pull_input
from ..hosting.summary import STATUS_MARKER, compose, upsert_summary
from ..models import Connection, PullRequest, Review, WebhookDelivery
from . import account, inputs
from . import status as commit_status

log = logging.getLogger("quorum.prflow")

Status = WebhookDelivery.Status
WORKING = "working since "
STALE_CLAIM = dt.timedelta(minutes=30)  # a worker that died mid-delivery: claimable again
START_EVENTS = ("opened", "synchronize", "reopened", "command")
MAX_ATTEMPTS = 5
CLAIM_TRIES = 3  # an earlier round finished while this one was fetched: fetch again


@dataclass
class Outcome:
    status: str            # done | ignored | failed | retry | skipped
    detail: str
    retry_in: float | None = None
    run_id: int | None = None


def backoff(attempt: int, retry_after: float | None) -> float:
    """Seconds before the next attempt: what the provider asked for, else doubling."""
    return retry_wait(attempt, retry_after, settings.QUORUM_PR_RETRY_SECONDS)


# --- the delivery's row -------------------------------------------------------------------------
def _claim(pk: int) -> WebhookDelivery | None:
    with transaction.atomic():
        d = (WebhookDelivery.objects.select_for_update()
             .select_related("connection__installation__app").filter(pk=pk).first())
        if d is None or d.status != Status.QUEUED or d.connection is None:
            return None
        if d.detail.startswith(WORKING):
            try:
                since = dt.datetime.fromisoformat(d.detail.removeprefix(WORKING))
            except ValueError:
                since = None
            if since is not None and timezone.now() - since < STALE_CLAIM:
                return None
        d.detail = WORKING + timezone.now().isoformat()
        d.save(update_fields=["detail"])
        return d


_FINAL = {"failed": Status.FAILED, "ignored": Status.IGNORED}


def _finish(pk: int, status: str, detail: str, pr: PullRequest | None = None) -> None:
    fields = {"status": status, "detail": detail[:4000]}
    if pr is not None:
        fields["pull_request"] = pr
    WebhookDelivery.objects.filter(pk=pk).update(**fields)


def handle_delivery(delivery_pk: int, *, attempt: int = 0, max_attempts: int = MAX_ATTEMPTS,
                    enqueue: bool = True) -> Outcome:
    """Act on the delivery once; safe to call again (it then does nothing)."""
    d = _claim(delivery_pk)
    if d is None:
        return Outcome("skipped", "The delivery was handled already, or is being handled.")
    try:
        outcome, pr = _handle(d, enqueue)
    except HostError as exc:
        if exc.retryable and attempt < max_attempts:
            wait = backoff(attempt, exc.retry_after)
            detail = (f"The provider did not answer as hoped ({exc}); trying again in "
                      f"{wait:.0f} s (attempt {attempt + 2} of {max_attempts + 1}).")
            _finish(d.pk, Status.QUEUED, detail)
            return Outcome("retry", detail, retry_in=wait)
        outcome, pr = Outcome("failed", f"The provider refused: {exc}"), None
    except services.DailyLimitReached as exc:
        outcome, pr = Outcome("failed", str(exc)), None
    except Exception:
        log.exception("webhook delivery %s failed", d.pk)
        outcome, pr = Outcome("failed", "An internal error stopped this delivery; the server "
                                        "log has the details."), None
    _finish(d.pk, _FINAL.get(outcome.status, Status.DONE), outcome.detail, pr)
    return outcome


# --- acting on it --------------------------------------------------------------------------------
def client_of(conn: Connection, *, timeout: float | None = None) -> HostClient:
    """The provider's client for ``conn`` (its token, or its GitHub App installation's: minting
    one is a network call, so never inside a transaction). Raises ValueError when the
    connection cannot be used (a token's variable not set, a key that cannot be read)."""
    from dataclasses import replace

    from reviews_app import hosting
    from reviews_app.connections.secrets import repo_ref

    ref = repo_ref(conn)
    return hosting.client_for(ref if timeout is None else replace(ref, timeout=timeout))


def _handle(d: WebhookDelivery, enqueue: bool) -> tuple[Outcome, PullRequest | None]:
    conn = d.connection
    assert conn is not None  # _claim takes only a connection's deliveries
    if not conn.active:
        return Outcome("done", "The connection is turned off: nothing was done."), None
    if not d.number:
        return Outcome("failed", "The delivery names no pull request."), None
    if d.event not in (*START_EVENTS, "closed"):
        return Outcome("done", f"The event {d.event[:50]!r} is not acted on."), None
    try:
        client = client_of(conn)
    except ValueError as exc:  # e.g. the token's environment variable is not set
        return Outcome("failed", f"The connection cannot be used: {exc}"), None
    try:
        # Who Quorum writes as, learned once (its own commands are never acted on, and its
        # markers alone count when comments are read back).
        try:
            bot = account.learn(conn, client)
        except HostError as exc:
            if exc.retryable:
                raise
            bot = ""  # the provider will not say: a person's command is still acted on
            log.warning("connection %s: its account is not known (%s)", conn.pk, exc)
        if d.event == "command" and account.is_ours(conn, d.sender, bot):
            return Outcome("ignored", f"The comment is by Quorum's own account ({bot}): "
                                      "not acted on."), None
        pull = client.pull(d.number)
        if pull.state != "open":
            pr = _save_pull(conn, pull)
            n = _cancel_running(pr, conn, "the pull request was " + pull.state)
            note = _closed_status(client, conn, pr) if conn.status_comment else ""
            waiting = _awaiting_triage(pr)
            if waiting:
                note += (f" {waiting} review(s) awaiting triage stay in Quorum; nothing is "
                         "published to the closed pull request unless a person chooses to.")
            return Outcome("done", f"Pull request #{pull.number} is {pull.state}: "
                                   f"{n} running review(s) cancelled.{note}"), pr
        if d.event == "closed":  # reopened since: the reopened delivery starts the round
            return Outcome("done", f"Pull request #{pull.number} is open again: nothing to "
                                   "end."), None
        return _start_round(d, conn, client, pull, enqueue)
    finally:
        client.close()


def _upsert(conn: Connection, pull: PullInfo) -> PullRequest:
    """The pull request's row, created or brought up to date, locked until the transaction
    this runs in commits."""
    fields = {"title": pull.title[:300], "url": pull.url[:500] if _http(pull.url) else "",
              "author": pull.author[:150], "state": pull.state, "base_ref": pull.base_ref[:250],
              "base_sha": pull.base_sha[:64], "head_ref": pull.head_ref[:250],
              "head_sha": pull.head_sha[:64]}
    pr, created = PullRequest.objects.select_for_update().get_or_create(
        connection=conn, number=pull.number, defaults=fields)
    if not created:
        for k, v in fields.items():
            setattr(pr, k, v)
        pr.save()
    return pr


def _save_pull(conn: Connection, pull: PullInfo) -> PullRequest:
    """``_upsert`` in a short transaction of its own."""
    with transaction.atomic():
        return _upsert(conn, pull)


def _http(url: str) -> bool:
    return isinstance(url, str) and url.lower().startswith(("https://", "http://"))


def _cancel_running(pr: PullRequest, conn: Connection, why: str,
                    keep: int | None = None) -> int:
    """Cancel the pull request's reviews still running (before their synthesis): those
    waiting at triage are left to the person."""
    runs = (Run.objects.filter(review__pull_request=pr, review__proposed_verdict="",
                               forked_from__isnull=True)  # a fork is a person's, not a round
            .exclude(status__in=TERMINAL))
    if keep is not None:
        runs = runs.exclude(pk=keep)
    n = 0
    for run in runs:
        engine.cancel(run, conn.owner)
        n += 1
        log.info("review %s of %s cancelled: %s", run.pk, pr, why)
    return n


def _awaiting_triage(pr: PullRequest) -> int:
    return Review.objects.filter(pull_request=pr, run__status=RunStatus.AWAITING_TRIAGE,
                                 run__forked_from__isnull=True).count()


def _reviewed(pr: PullRequest, head: str) -> Review | None:
    """A review of this head that did not fail or get cancelled."""
    return (Review.objects.filter(pull_request=pr, head_sha=head, run__forked_from__isnull=True)
            .exclude(run__status__in=[RunStatus.FAILED, RunStatus.CANCELLED])
            .select_related("run").order_by("-id").first())


def _previous(pr: PullRequest) -> Review | None:
    """The latest synthesized round: where an incremental round starts and what it carries
    (a fork of a round is no round of the pull request)."""
    return (Review.objects.filter(pull_request=pr, run__forked_from__isnull=True)
            .exclude(proposed_verdict="")
            .select_related("run").order_by("-id").first())


@dataclass
class _Fetched:
    """A round's input, fetched before anything is claimed."""

    previous: Review | None
    from_sha: str
    inp: services.ReviewInput
    prepared: object | None      # diffs.Prepared, or None when there is nothing to review
    nothing: str = ""            # why there is nothing to review


def _fetch(conn: Connection, client: HostClient, pull: PullInfo, pr: PullRequest | None,
           cfg, fresh: bool) -> _Fetched:
    """Everything the round needs from the provider (network: outside any transaction)."""
    head = pull.head_sha
    previous = _previous(pr) if pr is not None else None
    asked = "" if fresh or previous is None or previous.head_sha in ("", head) \
        else previous.head_sha
    got = pull_input(client, pull.number, head_sha=head, from_sha=asked or None,
                     max_bytes=settings.QUORUM_REVIEW_MAX_UPLOAD_BYTES,
                     max_files=settings.QUORUM_REVIEW_MAX_FILES,
                     max_file_bytes=settings.QUORUM_PR_MAX_FILE_BYTES)
    from_sha = got.from_sha
    diff_text, contents, coverage = inputs.apply_paths(cfg, got.diff_text, got.contents,
                                                       list(got.coverage))
    title = " ".join(pull.title.split())
    inp = services.ReviewInput(
        kind=Review.Source.PULL_REQUEST, label=f"{conn.repository}#{pull.number}: {title}"
        [:300], diff_text=diff_text, contents=contents, coverage=coverage,
        meta={"provider": conn.provider, "repository": conn.repository,
              "number": pull.number, "url": pull.url[:500] if _http(pull.url) else "",
              "head_sha": head, "from_sha": from_sha})
    try:
        if not diff_text.strip():
            raise services.InputError(inputs.nothing_left(got.diff_text, coverage))
        prepared = services.prepare(inp)
    except services.InputError as exc:
        return _Fetched(previous, from_sha, inp, None, str(exc))
    inputs.apply_modes(cfg, prepared.files)
    return _Fetched(previous, from_sha, inp, prepared)


def _start_round(d: WebhookDelivery, conn: Connection, client: HostClient, pull: PullInfo,
                 enqueue: bool) -> tuple[Outcome, PullRequest | None]:
    head = pull.head_sha
    fresh = d.event == "command" and d.fresh
    # Read only until the claim: a retryable error while fetching leaves nothing saved.
    pr = PullRequest.objects.filter(connection=conn, number=pull.number).first()
    done = _reviewed(pr, head) if pr is not None else None
    if done is not None and not fresh:
        return _already(d, conn, client, _save_pull(conn, pull), done), pr
    cfg, notes = inputs.read_config(client, pull.base_sha)
    services.check_daily_limits({**services.default_models(), **cfg.models})
    for _try in range(CLAIM_TRIES):
        got = _fetch(conn, client, pull, pr, cfg, fresh)
        with transaction.atomic():
            pr = _upsert(conn, pull)
            done = _reviewed(pr, head)
            if done is not None and not fresh:  # another delivery started it meanwhile
                return Outcome("done", f"{head[:12]} was reviewed already (review "
                                       f"{done.run_id})."), pr
            latest = _previous(pr)
            if (latest and latest.pk) != (got.previous and got.previous.pk):
                continue  # a round finished meanwhile: fetch from it instead
            if got.prepared is None:
                pr.last_reviewed_sha = head
                pr.save(update_fields=["last_reviewed_sha", "updated_at"])
                return Outcome("done", f"Nothing reviewed at {head[:12]}: {got.nothing}"), pr
            run, round_no = _begin(d, conn, pr, pull, cfg, notes, got, enqueue)
        break
    else:
        return Outcome("failed", "Rounds of this pull request kept finishing while this one "
                                 "was being fetched; comment /quorum review to try again."), pr
    fell_back = [c for c in got.prepared.coverage if c.get("reason") == FULL_ROUND]
    if got.from_sha:
        kind = f"incremental from {got.from_sha[:12]}"
    elif fell_back:
        kind = f"full: {fell_back[0]['detail']}"
    else:
        kind = "full, as asked" if fresh else "full"
    detail = f"Round {round_no} ({kind}) of #{pull.number} at {head[:12]}: review {run.pk}."
    policy = cfg.publish.policy or conn.publish_policy
    if conn.status_comment and policy != Connection.Policy.NEVER:
        # Under "never" nothing is written on the pull request, a status comment included
        # (it would also overwrite the last published summary with a promise of another).
        detail += _status_comment(client, conn, pr, round_no, got.from_sha, head, policy)
    return Outcome("done", detail, run_id=run.pk), pr


def _begin(d: WebhookDelivery, conn: Connection, pr: PullRequest, pull: PullInfo, cfg,
           notes: list[str], got: _Fetched, enqueue: bool) -> tuple[Run, int]:
    """Write the round: its run and review, the superseded rounds cancelled, the head's
    status queued. Inside the claim's transaction; no network."""
    head, previous, from_sha = pull.head_sha, got.previous, got.from_sha
    round_no = (pr.reviews.aggregate(n=Max("pr_round"))["n"] or 0) + 1
    inp = got.inp
    if from_sha and previous is not None:
        got.prepared.coverage.append(inputs.earlier_round(previous, from_sha, head, round_no))
    options = {"suppressed": inputs.suppressed(conn),
               "carried": inputs.carried(previous),
               "rules": cfg.rules_option(),
               "pull_request": {"number": pull.number, "round": round_no,
                                "head_sha": head, "from_sha": from_sha,
                                "previous_round": previous.pr_round if previous else None}}
    run = services.start_review(conn.owner, inp, got.prepared, models=cfg.models or None,
                                options=options, connection=conn, enqueue=enqueue)
    Review.objects.filter(run=run).update(
        pull_request=pr, pr_round=round_no, previous=previous, base_sha=pull.base_sha[:64],
        from_sha=from_sha, head_sha=head[:64], repo_config=cfg.stored(), config_notes=notes)
    _cancel_running(pr, conn, f"superseded by round {round_no}", keep=run.pk)
    pr.last_reviewed_sha = head
    pr.save(update_fields=["last_reviewed_sha", "updated_at"])
    review = Review.objects.get(run=run)
    if commit_status.enabled(conn, review):
        commit_status.start(pr, head, review)
    return run, round_no


# --- what the pull request's one summary comment says -----------------------------------------
def _write_status(client: HostClient, conn: Connection, pr: PullRequest, line: str) -> str:
    """Put ``line`` on top of the pull request's summary comment (the last published summary
    stays below it). Returns a sentence for the delivery when it could not be written."""
    try:
        cid = upsert_summary(client, pr.number, pr.summary_comment_id,
                             compose(line, pr.summary_body), bot=account.known(conn))
    except HostError as exc:
        return f" The status comment could not be written ({exc})."
    PullRequest.objects.filter(pk=pr.pk).update(summary_comment_id=str(cid)[:64])
    return ""


def _already(d: WebhookDelivery, conn: Connection, client: HostClient, pr: PullRequest,
             done: Review) -> Outcome:
    """The head was reviewed already: a command points to that review instead of starting
    another round (``/quorum review fresh`` asks for a new one)."""
    head = pr.head_sha
    where = f"round {done.pr_round} (review {done.run_id})"
    if d.event != "command":
        return Outcome("done", f"{head[:12]} was reviewed already in {where}.")
    detail = (f"{head[:12]} was reviewed already in {where}: pointed to it. Comment "
              "/quorum review fresh for a new full round.")
    from .publishing import content, policy

    if policy.policy_of(done)[0] != Connection.Policy.NEVER:
        url = content.quorum_url(done)
        link = f" — [open it in Quorum]({url})" if url else ""
        who = "".join(c for c in d.sender if c.isalnum() or c in "-_.[]")[:60]
        line = (f"**Quorum**: `{head[:7]}` was reviewed already in round {done.pr_round}"
                f"{link}{' (asked by `' + who + '`)' if who else ''}. Comment "
                "`/quorum review fresh` for a new full round.")
        detail += _write_status(client, conn, pr, line)
    return Outcome("done", detail, run_id=done.run_id)


def _closed_status(client: HostClient, conn: Connection, pr: PullRequest) -> str:
    """The pull request closed while the summary comment still announced a round: say the
    review stopped. A summary with no status line on top is left as it is."""
    if not pr.summary_comment_id:
        return ""
    try:
        mine = [c for c in client.comments(pr.number) if c.id == pr.summary_comment_id]
    except HostError as exc:
        return f" The status comment could not be read ({exc})."
    if not mine or STATUS_MARKER not in mine[0].body:
        return ""
    note = _write_status(client, conn, pr, (
        f"**Quorum** stopped: the pull request was {pr.state} before its latest round was "
        "published. Nothing more is posted here unless it is reopened or a person publishes "
        "from Quorum."))
    return note or " The status comment says the review stopped."


def _status_comment(client: HostClient, conn: Connection, pr: PullRequest, round_no: int,
                    from_sha: str, head: str, policy: str) -> str:
    """The round's status line on top of the summary comment (created with it when there is
    none yet). A failure here does not stop the review."""
    what = (f"the commits from `{from_sha[:7]}` to `{head[:7]}`" if from_sha
            else f"the pull request at `{head[:7]}`")
    then = ("A person triages the findings before any is published here"
            if policy == Connection.Policy.AFTER_TRIAGE else
            "The findings above the repository's severity and confidence thresholds are "
            "published here when it is done")
    below = "; the summary below is of the last published round" if pr.summary_body else ""
    return _write_status(client, conn, pr, f"**Quorum** is reviewing {what} (round "
                                           f"{round_no}). {then}{below}.")
