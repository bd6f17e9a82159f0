from django.contrib import admin

from agents_app.admin import MaskedRecordAdmin

from .connections import admin as _connections_admin  # noqa: F401 - registers its models
from .models import Finding, Review, ReviewRule, TriageDecision


class FindingInline(admin.TabularInline):
    model = Finding
    extra = 0
    can_delete = False
    fields = ("key", "kept", "severity", "category", "file", "line", "title", "decision",
              "decided_by")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


class TriageDecisionInline(admin.TabularInline):
    """The triage history, read-only: decisions are append-only."""

    model = TriageDecision
    extra = 0
    can_delete = False
    fields = ("at", "actor_name", "kind", "version", "changes", "verdict_before",
              "verdict_after", "note")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Review)
class ReviewAdmin(MaskedRecordAdmin):
    list_display = ("run_id", "source_label", "source_kind", "owner", "proposed_verdict",
                    "final_verdict", "created_at")
    list_filter = ("source_kind", "proposed_verdict", "final_verdict")
    search_fields = ("source_label", "summary")
    readonly_fields = ("run", "owner", "verdict_decided_by")
    exclude = ("diff_text",)
    inlines = [FindingInline, TriageDecisionInline]


@admin.register(Finding)
class FindingAdmin(MaskedRecordAdmin):
    list_display = ("key", "review", "severity", "category", "file", "line", "kept", "decision")
    list_filter = ("severity", "category", "kept", "decision")
    search_fields = ("title", "file")
    readonly_fields = ("review", "decided_by")


@admin.register(ReviewRule)
class ReviewRuleAdmin(MaskedRecordAdmin):
    """Viewed and deleted here; written, approved and retired on the rules page."""

    list_display = ("pk", "title", "owner", "connection", "path_glob", "severity", "status",
                    "origin", "times_applied", "created_at")
    list_filter = ("status", "origin", "severity")
    search_fields = ("title", "text", "path_glob")
    readonly_fields = ("owner", "connection", "created_by", "decided_by")
