from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from ..teams.models import Team


class DefaultAction(models.TextChoices):
    APPROVE = "approve", "Approve"
    REJECT = "reject", "Reject"
    CANCEL = "cancel", "Cancel the run"


class GateRule(models.Model):
    """How a team's gates are decided. The first rule (by ``position``) whose pattern, gate,
    repository and paths all match a gate applies to it; with none, a team gate needs one
    approval from any approver and has no deadline."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="gate_rules")
    name = models.CharField(max_length=100)
    position = models.PositiveIntegerField(default=0)
    pattern = models.CharField(max_length=40, blank=True, help_text="Empty: every pattern")
    gate = models.CharField(max_length=40, blank=True, help_text="Empty: every gate")
    repository = models.CharField(max_length=300, blank=True,
                                  help_text="A glob on the repository; empty: any")
    paths = models.TextField(blank=True, help_text="Globs, one per line; any changed file")
    required_approvals = models.PositiveSmallIntegerField(default=1)
    exclude_initiator = models.BooleanField(default=False)
    rejections_to_reject = models.PositiveSmallIntegerField(default=1)
    assign_user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="+")
    assign_team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    use_codeowners = models.BooleanField(default=False)
    deadline_minutes = models.PositiveIntegerField(null=True, blank=True)
    remind_minutes_before = models.PositiveIntegerField(null=True, blank=True)
    escalate_minutes_before = models.PositiveIntegerField(null=True, blank=True)
    escalate_to = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    default_action = models.CharField(max_length=10, choices=DefaultAction.choices,
                                      blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team", "position", "id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.team})"


class GateOpening(models.Model):
    """One stop of a run at a gate, from the moment it stopped until it was decided (or the
    run moved on another way). ``seq`` is the run's stage sequence now: an edit at the gate
    moves it on, so a page loaded before the edit cannot approve what it did not show."""

    run = models.ForeignKey("agents_app.Run", on_delete=models.CASCADE, related_name="openings")
    gate = models.CharField(max_length=40)
    opened_seq = models.PositiveIntegerField()
    seq = models.PositiveIntegerField()
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    rule = models.ForeignKey(GateRule, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="openings")
    policy = models.JSONField(default=dict, blank=True,
                              help_text="The rule as it was when the gate opened")
    required = models.PositiveSmallIntegerField(default=1)
    content_hash = models.CharField(max_length=64, blank=True)
    assignee_user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                      on_delete=models.SET_NULL, related_name="+")
    assignee_team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="+")
    opened_at = models.DateTimeField(auto_now_add=True)
    deadline_at = models.DateTimeField(null=True, blank=True)
    remind_at = models.DateTimeField(null=True, blank=True)
    escalate_at = models.DateTimeField(null=True, blank=True)
    reminded_at = models.DateTimeField(null=True, blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    defaulted_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=20, blank=True)

    class Meta:
        ordering = ["run", "opened_seq"]
        constraints = [
            models.UniqueConstraint(fields=["run", "opened_seq"], name="one_opening_per_stop"),
        ]
        indexes = [
            models.Index(fields=["remind_at"], condition=Q(closed_at__isnull=True,
                         reminded_at__isnull=True), name="opening_remind_due"),
            models.Index(fields=["escalate_at"], condition=Q(closed_at__isnull=True,
                         escalated_at__isnull=True), name="opening_escalate_due"),
            models.Index(fields=["deadline_at"], condition=Q(closed_at__isnull=True,
                         defaulted_at__isnull=True), name="opening_deadline_due"),
            models.Index(fields=["assignee_user"], condition=Q(closed_at__isnull=True),
                         name="opening_open_by_user"),
            models.Index(fields=["assignee_team"], condition=Q(closed_at__isnull=True),
                         name="opening_open_by_team"),
        ]

    def __str__(self) -> str:
        return f"{self.gate} of run {self.run_id} (stop {self.opened_seq})"


class Channel(models.TextChoices):
    PAGE = "page", "the run page"
    INBOX = "inbox", "the inbox"
    BATCH = "batch", "a batch decision in the inbox"
    LINK = "link", "a notification's link"
    COMMAND = "command", "the command line"
    POLICY = "policy", "a policy"
    TIMER = "timer", "the deadline"


class GateVote(models.Model):
    """One person's approval or rejection of exactly what the gate showed (``content_hash``).
    An edit at the gate voids the votes on what it replaced."""

    opening = models.ForeignKey(GateOpening, on_delete=models.CASCADE, related_name="votes")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="+")
    action = models.CharField(max_length=10)  # approve | reject
    content_hash = models.CharField(max_length=64)
    channel = models.CharField(max_length=10, choices=Channel.choices)
    feedback = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    voided_at = models.DateTimeField(null=True, blank=True)
    void_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["opening", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["opening", "user"], condition=Q(voided_at__isnull=True),
                                    name="one_live_vote_per_person"),
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.action}s {self.opening} ({self.content_hash[:12]})"


class GateAudit(models.Model):
    """Everything that happened at a gate, in order: opened, assigned, reassigned, delegated,
    approved, rejected, edited (approvals reset), reminded, escalated, decided, decided by
    policy. Shown on the run page and exported as CSV or JSON."""

    opening = models.ForeignKey(GateOpening, on_delete=models.CASCADE, related_name="audit")
    run = models.ForeignKey("agents_app.Run", on_delete=models.CASCADE, related_name="gate_audit")
    at = models.DateTimeField(auto_now_add=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.SET_NULL, related_name="+")
    actor_name = models.CharField(max_length=150, blank=True)
    channel = models.CharField(max_length=10, choices=Channel.choices, blank=True)
    what = models.CharField(max_length=20)
    content_hash = models.CharField(max_length=64, blank=True)
    approvals = models.PositiveSmallIntegerField(default=0)
    required = models.PositiveSmallIntegerField(default=1)
    detail = models.TextField(blank=True)

    class Meta:
        ordering = ["run", "id"]

    def __str__(self) -> str:
        return f"{self.what} at {self.opening} by {self.actor_name or 'Quorum'}"
