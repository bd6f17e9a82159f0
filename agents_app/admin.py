import json

from django.contrib import admin
from django.db import models

from common import secret_keys

from .llm.gateway import redact
from .models import Approval, Event, ModelCall, PlanVersion, Run, StepResult
from .patterns import PATTERNS, pattern_label


class RecordAdmin(admin.ModelAdmin):
    """A record of what happened (a run, a model call, an event, a review): the admin views it
    and may delete it, never edits it, and shows every text with secrets shortened or blanked
    (a run's state holds the diff it reviewed, a call its prompt). Nothing is saved."""

    mask = staticmethod(redact)  # text -> text

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def get_object(self, request, object_id, from_field=None):
        obj = super().get_object(request, object_id, from_field)
        if obj is not None:
            for field in obj._meta.concrete_fields:
                if isinstance(field, (models.TextField, models.CharField, models.JSONField)):
                    setattr(obj, field.attname, self._masked(getattr(obj, field.attname)))
        return obj

    def _masked(self, value):
        if isinstance(value, str):
            return self.mask(value)
        if not isinstance(value, (dict, list)):
            return value
        # Masked as one text: a private key block's lines may be separate items of a list.
        text = self.mask(json.dumps(value, ensure_ascii=False))
        try:
            return json.loads(text)
        except ValueError:
            return text  # shown as text; what matters is that no secret is in it


class MaskedRecordAdmin(RecordAdmin):
    """For code under review: any secret-looking value, not only known key formats."""

    mask = staticmethod(secret_keys.mask)


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


class PlanVersionInline(ReadOnlyInline):
    model = PlanVersion
    fields = ("version", "author", "reason", "steps")
    readonly_fields = fields


class StepResultInline(ReadOnlyInline):
    model = StepResult
    fields = ("plan_version", "index", "status", "description")
    readonly_fields = fields


class ApprovalInline(ReadOnlyInline):
    model = Approval
    fields = ("gate", "action", "plan_version", "edited", "user", "feedback")
    readonly_fields = fields


class PatternFilter(admin.SimpleListFilter):
    """Patterns by name in words, not by key."""

    title = "pattern"
    parameter_name = "pattern"

    def lookups(self, request, model_admin):
        return [(name, p.label or name) for name, p in PATTERNS.items()]

    def queryset(self, request, queryset):
        return queryset.filter(pattern=self.value()) if self.value() else queryset


@admin.register(Run)
class RunAdmin(RecordAdmin):
    list_display = ("id", "owner", "pattern_name", "status", "offline", "cost_usd", "calls",
                    "created_at")
    list_filter = ("status", PatternFilter, "offline")
    search_fields = ("task", "owner__username")
    readonly_fields = ("stage_seq", "stage_attempt", "lease_owner", "lease_expires_at",
                       "last_event_seq", "created_at", "updated_at", "finished_at")
    inlines = [PlanVersionInline, StepResultInline, ApprovalInline]

    @admin.display(description="Pattern", ordering="pattern")
    def pattern_name(self, run):
        return pattern_label(run.pattern)


@admin.register(Event)
class EventAdmin(RecordAdmin):
    list_display = ("run", "seq", "kind", "message", "created_at")
    list_filter = ("kind",)
    raw_id_fields = ("run",)


@admin.register(ModelCall)
class ModelCallAdmin(RecordAdmin):
    list_display = ("run", "stage", "role", "model", "prompt_tokens", "completion_tokens",
                    "cost_usd", "latency_ms", "error")
    list_filter = ("role", "model")
    raw_id_fields = ("run",)


@admin.register(PlanVersion)
class PlanVersionAdmin(admin.ModelAdmin):
    list_display = ("run", "version", "author", "reason", "created_at")
    raw_id_fields = ("run",)


@admin.register(StepResult)
class StepResultAdmin(admin.ModelAdmin):
    list_display = ("run", "plan_version", "index", "status", "description")
    list_filter = ("status",)
    raw_id_fields = ("run",)


@admin.register(Approval)
class ApprovalAdmin(admin.ModelAdmin):
    list_display = ("run", "gate", "action", "plan_version", "edited", "user", "created_at")
    list_filter = ("action", "gate")
    raw_id_fields = ("run",)
