from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from ..teams.models import Team


class Kind(models.TextChoices):
    OPENED = "opened", "A gate opens for me or my team"
    ASSIGNED = "assigned", "A gate is assigned or delegated to me"
    REMINDER = "reminder", "A gate for me is near its deadline"
    ESCALATED = "escalated", "A gate is escalated to my team"
    RESET = "reset", "My approval was reset by an edit"
    DECIDED = "decided", "A gate I was asked about is decided"


ALL_KINDS = [k.value for k in Kind]


def all_kinds() -> list[str]:
    return list(ALL_KINDS)


class Preference(models.Model):
    """What one person receives, by which channel (absent: everything by email)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="notification_preference")
    email_kinds = models.JSONField(default=all_kinds, blank=True)
    webhook_kinds = models.JSONField(default=all_kinds, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"Notification choices of {self.user}"


class Endpoint(models.Model):
    """An outgoing webhook: ``signed`` posts our JSON signed per the Standard Webhooks
    specification; ``chat`` posts a message through Apprise to a chat tool's URL (Slack,
    Microsoft Teams, Discord, Mattermost, Matrix, ...). A person's own, or a team's."""

    class Style(models.TextChoices):
        SIGNED = "signed", "Signed JSON (Standard Webhooks)"
        CHAT = "chat", "A chat tool, through Apprise"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="notification_endpoints")
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="notification_endpoints")
    name = models.CharField(max_length=100)
    style = models.CharField(max_length=10, choices=Style.choices, default=Style.SIGNED)
    url_sealed = models.TextField()
    url_hint = models.CharField(max_length=120, blank=True)
    secret_sealed = models.TextField(blank=True)
    kinds = models.JSONField(default=all_kinds, blank=True)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["owner", "name"]

    def __str__(self) -> str:
        return f"Webhook {self.name} ({self.style})"


class Notification(models.Model):
    """The outbox: one row per message to one person (email) or one endpoint (webhook),
    written with what caused it, sent after commit, retried with backoff. ``key`` makes a
    redelivered task or a re-fired timer add nothing."""

    class State(models.TextChoices):
        PENDING = "pending", "Waiting to be sent"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed for good"

    key = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=12, choices=Kind.choices)
    channel = models.CharField(max_length=10)  # email | webhook
    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                  on_delete=models.CASCADE, related_name="+")
    endpoint = models.ForeignKey(Endpoint, null=True, blank=True, on_delete=models.CASCADE,
                                 related_name="notifications")
    opening = models.ForeignKey("agents_app.GateOpening", null=True, blank=True,
                                on_delete=models.CASCADE, related_name="notifications")
    run = models.ForeignKey("agents_app.Run", null=True, blank=True, on_delete=models.CASCADE,
                            related_name="+")
    subject = models.CharField(max_length=300)
    body = models.TextField(blank=True)
    payload = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["next_attempt_at"], condition=Q(state="pending"),
                                name="notification_due"),
                   # An endpoint's latest notification (the settings page), without a scan of
                   # all it was ever sent.
                   models.Index(fields=["endpoint", "-id"], name="notification_endpoint_latest")]

    def __str__(self) -> str:
        return f"{self.kind} by {self.channel} ({self.state})"


class DecisionLink(models.Model):
    """The link in a notification: signed, single use, expiring, and only for the person it
    was sent to. Following it opens the run page at the gate; deciding is still a POST."""

    nonce = models.CharField(max_length=64, unique=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="+")
    opening = models.ForeignKey("agents_app.GateOpening", on_delete=models.CASCADE,
                                related_name="links")
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"Link for {self.user} to {self.opening}"
