"""Memories: short, path-scoped rules a team teaches the reviewers ("in `tests/`, asserts are
fine"). A rejected finding's reason becomes a *pending* suggestion; only a memory a person
approved is active and reaches the reviewers."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from ..models.review import MaskedOnRead, RejectReason


class Memory(MaskedOnRead, models.Model):
    masked_fields = ("text",)

    class Status(models.TextChoices):
        PENDING = "pending", "Suggested"
        ACTIVE = "active", "Active"
        RETIRED = "retired", "Retired"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="memories")
    # None: every review of the owner's (pasted diffs included); else that repository's.
    connection = models.ForeignKey("reviews_app.Connection", null=True, blank=True,
                                   on_delete=models.CASCADE, related_name="memories")
    path_glob = models.CharField(max_length=300, default="**",
                                 help_text='Which files it applies to, e.g. "tests/**"')
    text = models.TextField(help_text="The rule, in a sentence the reviewers read")
    # Optional deterministic match, so a memory works without a model too: findings in
    # matching files with this rule id / category / title are dropped (or downgraded).
    match = models.JSONField(default=dict, blank=True,
                             help_text='{"rule": …, "category": …, "title": …}')
    effect = models.CharField(max_length=12, default="drop",
                              help_text="drop (the finding is dropped) or downgrade")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    reason = models.CharField(max_length=20, blank=True, choices=RejectReason.choices)
    source_finding = models.ForeignKey("reviews_app.Finding", null=True, blank=True,
                                       on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    times_applied = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "memories"

    def __str__(self) -> str:
        return f"Memory {self.pk} ({self.status}, {self.path_glob}): {self.text[:60]}"
