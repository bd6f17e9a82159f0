"""The record of triage: one append-only ``TriageDecision`` per decision on a review."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from ..models.review import Review


class AppendOnly(models.QuerySet):
    """Decision records are never changed or removed one by one (deleting the review still
    takes them with it: Django's cascade does not go through this queryset)."""

    def update(self, **kwargs):
        raise TypeError("Triage decisions are append-only.")

    def delete(self):
        raise TypeError("Triage decisions are append-only.")


class TriageDecision(models.Model):
    """One decision on a review, written in the same transaction as the change it records."""

    class Kind(models.TextChoices):
        ACCEPT = "accept", "accepted"
        REJECT = "reject", "rejected"
        UNDO = "undo", "undid the decision on"
        ACCEPT_SEVERITY = "accept_severity", "accepted all of a severity"
        ACCEPT_REST = "accept_rest", "accepted all remaining"
        REJECT_REST = "reject_rest", "rejected all remaining"
        FINALISE = "finalise", "finalised the verdict"
        REOPEN = "reopen", "reopened triage"
        CARRY = "carry", "kept the decisions of an earlier round on"

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="decisions")
    version = models.PositiveIntegerField(
        help_text="The triage version: the one a finalisation creates, or the last finalised "
                  "one (0 before the first) for the other decisions")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.SET_NULL, related_name="+")
    actor_name = models.CharField(max_length=150, help_text="Kept if the account goes away")
    at = models.DateTimeField(default=timezone.now)
    changes = models.JSONField(default=list, blank=True,
                               help_text='Findings changed: [{"finding", "before", "after"}]')
    verdict_before = models.CharField(max_length=20, blank=True)
    verdict_after = models.CharField(max_length=20, blank=True)
    note = models.TextField(blank=True)

    objects = AppendOnly.as_manager()

    class Meta:
        ordering = ["review", "id"]

    def __str__(self) -> str:
        return f"{self.actor_name} {self.get_kind_display()} ({self.at:%Y-%m-%d %H:%M})"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise TypeError("Triage decisions are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("Triage decisions are append-only.")
