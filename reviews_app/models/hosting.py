"""Connected repositories (issue 15): a connection to a repository on GitHub, GitLab or
Forgejo/Gitea, the webhook deliveries it received, the pull requests it follows, and what
Quorum published on them.

Tokens and webhook secrets are either read from an environment variable named by the
connection or stored sealed (``common/sealed.py``); only a short hint is ever shown again.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.urls import reverse


def new_hook_id() -> str:
    return secrets.token_urlsafe(18)


class Connection(models.Model):
    class Provider(models.TextChoices):
        GITHUB = "github", "GitHub"
        GITLAB = "gitlab", "GitLab"
        FORGEJO = "forgejo", "Forgejo / Gitea"

    class Policy(models.TextChoices):
        AFTER_TRIAGE = "after_triage", "After triage: you publish the findings you accepted"
        AUTOMATIC = "automatic", "Automatic: findings above a severity and confidence"
        NEVER = "never", "Never: findings stay in Quorum"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="connections")
    provider = models.CharField(max_length=10, choices=Provider.choices)
    repository = models.CharField(max_length=200, help_text='"owner/name" (GitLab: the full '
                                  'project path, e.g. "group/subgroup/project")')
    api_url = models.URLField(max_length=300, help_text="The provider's API base URL")
    # The token: an environment variable's name, or the value sealed; the hint is "…" plus the
    # last four characters, and is all a page ever shows.
    token_env = models.CharField(max_length=100, blank=True)
    token_sealed = models.TextField(blank=True)
    token_hint = models.CharField(max_length=20, blank=True)
    secret_env = models.CharField(max_length=100, blank=True)
    secret_sealed = models.TextField(blank=True)
    secret_hint = models.CharField(max_length=20, blank=True)
    # The webhook URL is /webhooks/<provider>/<hook_id>/: unguessable, one per connection.
    hook_id = models.CharField(max_length=40, unique=True, default=new_hook_id)
    publish_policy = models.CharField(max_length=20, choices=Policy.choices,
                                      default=Policy.AFTER_TRIAGE)
    auto_min_severity = models.CharField(max_length=10, default="high")
    auto_min_confidence = models.FloatField(default=0.7)
    status_comment = models.BooleanField(
        default=True, help_text="Post a short status comment while the review runs (it becomes "
                                "the summary)")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["repository", "id"]
        constraints = [models.UniqueConstraint(
            fields=["owner", "provider", "api_url", "repository"], name="connection_unique")]

    def __str__(self) -> str:
        return f"{self.get_provider_display()} {self.repository}"

    def get_absolute_url(self) -> str:
        return reverse("connection_detail", args=[self.pk])


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

    connection = models.ForeignKey(Connection, on_delete=models.CASCADE,
                                   related_name="deliveries")
    delivery_id = models.CharField(max_length=100)
    event = models.CharField(max_length=50, help_text="opened, synchronize, reopened, closed, "
                                                      "command")
    number = models.PositiveIntegerField(null=True, blank=True)
    head_sha = models.CharField(max_length=64, blank=True)
    sender = models.CharField(max_length=150, blank=True)
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    detail = models.TextField(blank=True)
    pull_request = models.ForeignKey(PullRequest, null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="deliveries")

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["connection", "delivery_id"],
                                               name="delivery_unique")]

    def __str__(self) -> str:
        return f"{self.connection} delivery {self.delivery_id} ({self.event})"


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
