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


class GitHubApp(models.Model):
    """A GitHub App registered by its owner: the way organisations connect review tools.

    Its private key (an environment variable's name, or the PEM sealed) signs the short JWTs
    that mint installation tokens; its webhook (``/webhooks/github-app/<hook_id>/``, signed
    with its secret) receives the installation events, which make each installed repository a
    connection, and the pull request events of every installed repository.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="github_apps")
    api_url = models.URLField(max_length=300, help_text="The GitHub API base URL")
    app_id = models.CharField(max_length=20, help_text="The App ID on the App's settings page")
    slug = models.CharField(max_length=100, blank=True,
                            help_text="Learned from GitHub: its comments are by <slug>[bot]")
    name = models.CharField(max_length=150, blank=True)
    key_env = models.CharField(max_length=100, blank=True)
    key_sealed = models.TextField(blank=True)
    key_hint = models.CharField(max_length=40, blank=True)
    secret_env = models.CharField(max_length=100, blank=True)
    secret_sealed = models.TextField(blank=True)
    secret_hint = models.CharField(max_length=20, blank=True)
    hook_id = models.CharField(max_length=40, unique=True, default=new_hook_id)
    # What the connections made for its installed repositories start with.
    publish_policy = models.CharField(max_length=20, default="after_triage")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["owner", "api_url", "app_id"],
                                               name="github_app_unique")]

    def __str__(self) -> str:
        return f"GitHub App {self.slug or self.app_id}"

    def get_absolute_url(self) -> str:
        return reverse("github_app_detail", args=[self.pk])

    @property
    def bot_login(self) -> str:
        return f"{self.slug}[bot]" if self.slug else ""


class Installation(models.Model):
    """One installation of a GitHub App on an account, with its cached installation token
    (sealed; minted again a few minutes before it expires)."""

    app = models.ForeignKey(GitHubApp, on_delete=models.CASCADE, related_name="installations")
    installation_id = models.BigIntegerField()
    account = models.CharField(max_length=150, blank=True)
    active = models.BooleanField(default=True)
    token_sealed = models.TextField(blank=True)
    token_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["app", "installation_id"],
                                               name="installation_unique")]

    def __str__(self) -> str:
        return f"Installation {self.installation_id} ({self.account or '?'})"


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
    # A team's connection: its reviews are the team's, decided by its approvers (issue 35).
    team = models.ForeignKey("agents_app.Team", null=True, blank=True, on_delete=models.PROTECT,
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
    commit_status = models.BooleanField(
        default=True, help_text='Report a "Quorum" status on the head commit, for branch '
                                "protection to require (green only after a person approves)")
    active = models.BooleanField(default=True)
    # Through a GitHub App installation instead of a token of its own (issue 31).
    installation = models.ForeignKey(Installation, null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="connections")
    # The provider account Quorum writes as ("who am I"), learned when the connection is
    # saved or on first use: its own "/quorum review" comments are never acted on.
    bot_login = models.CharField(max_length=150, blank=True)
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
