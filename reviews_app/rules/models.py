"""Review rules: plain-language rules a team asks every review to check ("handlers log the
error before returning 500"), scoped to a repository and a path glob, with a severity. The
guardian pass checks each active rule against a change and reports violations as findings
that name the rule. Rules can be written by hand, or generated from rejected findings' reasons
and past review comments; a generated rule starts *pending* until a person approves it."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from ..models.review import MaskedOnRead


class ReviewRule(MaskedOnRead, models.Model):
    masked_fields = ("text", "source_text")

    class Status(models.TextChoices):
        PENDING = "pending", "Suggested"
        ACTIVE = "active", "Active"
        RETIRED = "retired", "Retired"

    class Origin(models.TextChoices):
        MANUAL = "manual", "Written by a person"
        REJECTIONS = "rejections", "Generated from rejected findings"
        COMMENTS = "comments", "Generated from review comments"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="review_rules")
    # None: every review of the owner's (pasted diffs included); else that repository's.
    connection = models.ForeignKey("reviews_app.Connection", null=True, blank=True,
                                   on_delete=models.CASCADE, related_name="review_rules")
    path_glob = models.CharField(max_length=300, default="**",
                                 help_text='Which files it applies to, e.g. "api/**/*.ts"')
    title = models.CharField(max_length=200)
    text = models.TextField(help_text="The rule, in sentences the guardian checks the change "
                                      "against")
    severity = models.CharField(max_length=10, default="medium")
    # Optional deterministic check so a rule works offline too: a regular expression that an
    # added line breaking the rule matches, e.g. {"pattern": "console\\.log\\("}.
    matcher = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    origin = models.CharField(max_length=12, choices=Origin.choices, default=Origin.MANUAL)
    # What a generated rule was made from (the rejection reasons / comments, masked).
    source_text = models.TextField(blank=True)
    source_findings = models.JSONField(default=list, blank=True,
                                       help_text="Finding ids it was generated from")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    times_applied = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"Rule {self.pk} ({self.status}, {self.path_glob}): {self.title[:60]}"

    @property
    def pattern_problem(self) -> str:
        """Why this rule's stored pattern is not used by reviews (RE2 refuses it: a rule saved
        before patterns were matched with RE2 may use a backreference or lookaround), or ""."""
        pattern = (self.matcher or {}).get("pattern") if isinstance(self.matcher, dict) else ""
        if not pattern:
            return ""
        from .generate import pattern_error

        return pattern_error(pattern) or ""
