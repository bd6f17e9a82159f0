"""A code review is a run of the ``code_review`` pattern plus what a person triages: the
input and its coverage, the findings (kept and dropped, with reasons) and the decisions."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from agents_app.models import Run
from common.secret_keys import mask_deep

from ..pipeline.schema import CATEGORIES, SEVERITIES, VERDICTS


class MaskedOnRead:
    """Secrets are masked where findings are made and stored; masking the texts again as a
    row is read is the last line of defence, for every page, export and admin view, and for
    rows stored before masking existed."""

    masked_fields: tuple[str, ...] = ()

    @classmethod
    def from_db(cls, db, field_names, values):
        instance = super().from_db(db, field_names, values)
        for name in cls.masked_fields:
            if name in instance.__dict__:
                instance.__dict__[name] = mask_deep(instance.__dict__[name])
        return instance


class Verdict(models.TextChoices):
    APPROVE = "approve", "Approve"
    NEEDS_DISCUSSION = "needs_discussion", "Needs discussion"
    REQUEST_CHANGES = "request_changes", "Request changes"


assert tuple(Verdict.values) == VERDICTS  # noqa: S101 - one list, two layers


class Review(MaskedOnRead, models.Model):
    masked_fields = ("summary", "notes", "verdict_reason")

    class Source(models.TextChoices):
        PASTE = "paste", "Pasted diff"
        UPLOAD = "upload", "Uploaded patch"
        GIT = "git", "Local git range"
        GITHUB = "github", "GitHub pull request"
        PULL_REQUEST = "pull_request", "Pull request of a connected repository"

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="review")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="reviews")
    source_kind = models.CharField(max_length=20, choices=Source.choices)
    source_label = models.CharField(max_length=300)
    source_meta = models.JSONField(default=dict, blank=True)
    diff_text = models.TextField(help_text="The diff as reviewed (clipped to the byte limit)")
    files = models.JSONField(default=list, help_text="Per reviewed file: path, status, mode…")
    coverage = models.JSONField(default=list, help_text="Files skipped or clipped, with reasons")
    total_files = models.PositiveIntegerField(default=0)
    reviewers = models.JSONField(default=dict, help_text="Reviewer → status, error, counts")

    proposed_verdict = models.CharField(max_length=20, choices=Verdict.choices, blank=True)
    rule_verdict = models.CharField(max_length=20, choices=Verdict.choices, blank=True)
    summary = models.TextField(blank=True)
    notes = models.JSONField(default=list, blank=True)
    counts = models.JSONField(default=dict, blank=True, help_text="Kept findings by severity")

    final_verdict = models.CharField(max_length=20, choices=Verdict.choices, blank=True)
    verdict_reason = models.TextField(blank=True)
    verdict_decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                           on_delete=models.SET_NULL, related_name="+")
    verdict_decided_at = models.DateTimeField(null=True, blank=True)
    triage_version = models.PositiveIntegerField(
        default=0, help_text="How many times the verdict was finalised: while the verdict is "
                             "final, the version it shows; 0 before the first time")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    # A review of a connected repository's pull request (issue 15): which pull request, which
    # round (1 for the first push reviewed, then one per push), the review of the round before,
    # the commits reviewed (an incremental round reviews ``from_sha``..``head_sha``), and the
    # repository's ``.quorum.toml`` as read from the base branch with what was wrong in it.
    pull_request = models.ForeignKey("reviews_app.PullRequest", null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="reviews")
    pr_round = models.PositiveIntegerField(default=0)
    previous = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    base_sha = models.CharField(max_length=64, blank=True)
    from_sha = models.CharField(max_length=64, blank=True,
                                help_text="Empty for a full review; else the head reviewed before")
    head_sha = models.CharField(max_length=64, blank=True)
    repo_config = models.JSONField(default=dict, blank=True,
                                   help_text="The .quorum.toml settings applied (defaults filled)")
    config_notes = models.JSONField(default=list, blank=True,
                                    help_text="What was wrong in .quorum.toml, in plain words")

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["owner", "-id"], name="review_owner_recent")]

    def __str__(self) -> str:
        return f"Review {self.run_id} ({self.source_label})"

    def get_absolute_url(self) -> str:
        return reverse("review_detail", args=[self.run_id])

    @property
    def verdict(self) -> str:
        return self.final_verdict or self.proposed_verdict

    @property
    def examined_files(self) -> int:
        """Files an analyzer or a model that reads code really examined (known after the
        synthesis; before it, every file handed to the reviewers)."""
        left = {c.get("path") for c in self.coverage or ()
                if isinstance(c, dict) and c.get("reason") == "not_examined"}
        return sum(1 for f in self.files or () if f.get("path") not in left)


class RejectReason(models.TextChoices):
    """The one-click reasons for rejecting a finding; each can become a suggested memory."""

    WRONG = "wrong", "Wrong"
    NOT_IMPORTANT = "not_important", "Not important here"
    INTENDED = "intended", "Intended"
    DUPLICATE = "duplicate", "Duplicate"
    OTHER = "other", "Other"


class Resolution(models.TextChoices):
    IMPLEMENTED = "implemented", "Implemented"
    PARTIALLY = "partially", "Partially implemented"
    NOT = "not", "Not implemented"


class Finding(MaskedOnRead, models.Model):
    masked_fields = ("title", "description", "suggestion", "drop_reason", "history", "comment")

    class Decision(models.TextChoices):
        PENDING = "pending", "Pending"
        ACCEPTED = "accepted", "Accepted"
        REJECTED = "rejected", "Rejected"

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="findings")
    key = models.CharField(max_length=20)
    position = models.PositiveIntegerField(default=0, help_text="Order in the review")
    kept = models.BooleanField(default=True)
    drop_reason = models.TextField(blank=True)
    duplicate_of = models.CharField(max_length=20, blank=True)
    category = models.CharField(max_length=20, choices=[(c, c.title()) for c in CATEGORIES])
    severity = models.CharField(max_length=10, choices=[(s, s.title()) for s in SEVERITIES])
    file = models.TextField()
    line = models.PositiveIntegerField(null=True, blank=True)
    end_line = models.PositiveIntegerField(null=True, blank=True)
    title = models.TextField()
    description = models.TextField(blank=True)
    suggestion = models.TextField(blank=True)
    confidence = models.FloatField(default=0.5)
    reviewer = models.CharField(max_length=20)
    reviewers = models.JSONField(default=list)
    rules = models.JSONField(default=list, blank=True)
    history = models.JSONField(default=list, blank=True)

    decision = models.CharField(max_length=10, choices=Decision.choices, default=Decision.PENDING)
    comment = models.TextField(blank=True)
    reject_reason = models.CharField(max_length=20, blank=True, choices=RejectReason.choices)

    # Stable identity of "this problem at this code" across pushes and reviews (see
    # pipeline/fingerprint.py): a re-run never re-posts it, a rejected one is not raised again.
    fingerprint = models.CharField(max_length=64, blank=True, db_index=True)
    # Memories that changed this finding: [{"id": memory id, "effect": "dropped" | ...}]
    memories = models.JSONField(default=list, blank=True)
    # Carried from an earlier round of the same pull request: "<review run id>:<key>"
    carried_from = models.CharField(max_length=40, blank=True)
    # For a carried finding whose code changed: was its suggestion implemented?
    resolution = models.CharField(max_length=12, blank=True, choices=Resolution.choices)
    # --- issue 16: the quality stages and proven fixes -------------------------------------------
    # What kind of problem it is (schema.KINDS): security, bug, performance, …
    kind = models.CharField(max_length=20, blank=True)
    # Further places of the same problem when clustering merged repeats:
    # [{"file": …, "line": …, "end_line": …, "key": the merged finding's key}]
    locations = models.JSONField(default=list, blank=True)
    # What each quality stage did to it, in order: [{"stage": "safeguard" | "severity" |
    # "category" | "cluster" | …, "action": "keep" | "correct" | "discard" | "change" | …,
    # "reason": …, "before": {field: old value}}]
    quality = models.JSONField(default=list, blank=True)
    # The review rule it breaks (the guardian's findings): {"id": …, "text": …, "source": …}
    rule = models.JSONField(default=dict, blank=True)
    # The proposed fix and its proof: {"status": "proven" | "not_proven" | "none", "diff": …,
    # "reason": …, "checks": [{"name": …, "ok": bool, "detail": …}]}
    fix = models.JSONField(default=dict, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["review", "position"]
        constraints = [models.UniqueConstraint(fields=["review", "key"], name="finding_key_unique")]

    def __str__(self) -> str:
        return f"{self.key} {self.severity}: {self.title[:60]}"

    @property
    def where(self) -> str:
        if not self.line:
            return self.file
        if self.end_line and self.end_line > self.line:
            return f"{self.file}:{self.line}-{self.end_line}"
        return f"{self.file}:{self.line}"
