"""Connected repositories (issue 15): a connection to a repository on GitHub, GitLab or
Forgejo/Gitea, and the GitHub Apps and installations it may go through. The webhook
deliveries it received, the pull requests it follows and what Quorum published on them are
the pull-request flow's (``reviews_app/prflow/models.py``).

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
