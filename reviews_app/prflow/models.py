"""The pull-request flow's rows (issue 15): the pull requests a connection follows, the webhook
deliveries it received, what Quorum published on them, and its commit status on a head."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from ..models.hosting import Connection, GitHubApp


class PullRequest(models.Model):
    """A pull (merge) request Quorum follows, with where its published summary lives."""

    class State(models.TextChoices):
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed"
        MERGED = "merged", "Merged"

    connection = models.ForeignKey(Connection, on_delete=models.CASCADE,
                                   related_name="pull_requests")
    number = models.PositiveIntegerField()
    title = models.CharField(max_length=300, blank=True)
    url = models.URLField(max_length=500, blank=True)
    author = models.CharField(max_length=150, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN)
    base_ref = models.CharField(max_length=250, blank=True)
    base_sha = models.CharField(max_length=64, blank=True)
    head_ref = models.CharField(max_length=250, blank=True)
    head_sha = models.CharField(max_length=64, blank=True)
    last_reviewed_sha = models.CharField(max_length=64, blank=True)
    # The one summary comment, updated in place on every run (the status comment becomes it).
    summary_comment_id = models.CharField(max_length=64, blank=True)
    # The last summary published in it: a new round puts a status line on top of this text
    # rather than replacing it, so the summary stays readable while the round runs.
    summary_body = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [models.UniqueConstraint(fields=["connection", "number"],
                                               name="pull_request_unique")]

    def __str__(self) -> str:
        return f"{self.connection.repository}#{self.number}"


class WebhookDelivery(models.Model):
    """One webhook delivery, stored before it is acted on: its id is unique per connection,
    so a replayed delivery is refused."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        IGNORED = "ignored", "Ignored"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    # None for a GitHub App's own events (installations), which belong to ``app``.
    connection = models.ForeignKey(Connection, null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="deliveries")
    app = models.ForeignKey(GitHubApp, null=True, blank=True, on_delete=models.CASCADE,
                            related_name="deliveries")
    delivery_id = models.CharField(max_length=100)
    event = models.CharField(max_length=50, help_text="opened, synchronize, reopened, closed, "
                                                      "command")
    number = models.PositiveIntegerField(null=True, blank=True)
    head_sha = models.CharField(max_length=64, blank=True)
    sender = models.CharField(max_length=150, blank=True)
    fresh = models.BooleanField(default=False, help_text="/quorum review fresh: a new full "
                                                         "round even on a reviewed head")
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    detail = models.TextField(blank=True)
    pull_request = models.ForeignKey(PullRequest, null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="deliveries")

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["connection", "delivery_id"],
                                    condition=models.Q(app__isnull=True), name="delivery_unique"),
            models.UniqueConstraint(fields=["app", "delivery_id"],
                                    condition=models.Q(app__isnull=False),
                                    name="app_delivery_unique")]

    def __str__(self) -> str:
        return f"{self.connection or self.app} delivery {self.delivery_id} ({self.event})"


class Publication(models.Model):
    """Publishing one review (one triage version) to its pull request, with retries."""

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting to publish"
        PUBLISHING = "publishing", "Publishing"
        RETRYING = "retrying", "Failed, will retry"
        PUBLISHED = "published", "Published"
        FAILED = "failed", "Failed"

    review = models.ForeignKey("reviews_app.Review", on_delete=models.CASCADE,
                               related_name="publications")
    trigger = models.CharField(max_length=20, help_text="triage, automatic or manual")
    triage_version = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    # What was posted: {"summary_comment": id, "review": id, "comments": n, "skipped": n, ...}
    result = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    # A person chose to publish to a pull request that is closed or merged (never the default).
    to_closed = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["review", "triage_version", "trigger"],
                                               name="publication_unique")]

    def __str__(self) -> str:
        return f"Publication of review {self.review_id} ({self.status})"


class PublishedComment(models.Model):
    """An inline comment posted for a finding. The fingerprint is unique per pull request, so
    a re-run never posts the same finding twice (the provider's comments are also read back
    for the hidden fingerprint, in case this table is behind)."""

    pull_request = models.ForeignKey(PullRequest, on_delete=models.CASCADE,
                                     related_name="comments")
    fingerprint = models.CharField(max_length=64)
    finding = models.ForeignKey("reviews_app.Finding", null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="+")
    provider_id = models.CharField(max_length=64, blank=True)
    path = models.TextField(blank=True)
    line = models.PositiveIntegerField(null=True, blank=True)
    suggestion = models.BooleanField(default=False)
    posted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["pull_request", "fingerprint"],
                                               name="published_comment_unique")]

    def __str__(self) -> str:
        return f"Comment on {self.path}:{self.line} ({self.fingerprint[:12]})"


class CommitStatus(models.Model):
    """What Quorum reports on a pull request's head commit, for branch protection to require:
    a GitHub check run (a GitHub App) or commit status, a GitLab or Forgejo commit status,
    named "Quorum".

    ``state`` is what the review says now; ``synced`` what the provider was last told. A change
    of state bumps ``version`` and sends the sync task, which posts outside any transaction
    and records the version it posted, so a redelivered or late task never posts an older
    state over a newer one. Only a finalised approval of a complete review is ``success``.
    """

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        REVIEWING = "reviewing", "Reviewing"
        TRIAGE = "triage", "Waiting for triage"
        SUCCESS = "success", "Approved"
        FAILURE = "failure", "Not approved"
        CANCELLED = "cancelled", "Cancelled"
        ERROR = "error", "Review failed"

    pull_request = models.ForeignKey(PullRequest, on_delete=models.CASCADE,
                                     related_name="statuses")
    head_sha = models.CharField(max_length=64)
    review = models.ForeignKey("reviews_app.Review", null=True, blank=True,
                               on_delete=models.SET_NULL, related_name="+")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    description = models.CharField(max_length=300, blank=True)
    summary = models.TextField(blank=True, help_text="The check run's output (GitHub Apps)")
    version = models.PositiveIntegerField(default=1)
    synced_version = models.PositiveIntegerField(default=0)
    synced_state = models.CharField(max_length=10, blank=True)
    check_run_id = models.CharField(max_length=40, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["pull_request", "head_sha"],
                                               name="commit_status_unique")]

    def __str__(self) -> str:
        return f"Status of {self.pull_request} at {self.head_sha[:10]}: {self.state}"

    @property
    def in_sync(self) -> bool:
        return self.synced_version >= self.version
