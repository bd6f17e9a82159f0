"""The review rules page: rules written by hand (active at once), suggestions generated from
triage comments waiting for approval, active rules the reviews check, retired ones. Write,
suggest, approve, edit, retire, restore, and delete a suggestion.

Only the owner sees and changes a rule: anyone else gets a 404 (staff too), anonymous visitors
the sign-in page. htmx requests get the rule's card (or the page's forms) back; plain posts
redirect to the page, or get the whole page with the message when refused.
"""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from ..memories import match as globs
from ..models import Connection, ReviewRule
from ..status_change import change_status
from . import generate as rulegen
from . import service as rules

PAGE = "reviews_app/rules.html"
Status = ReviewRule.Status
SEVERITY_CHOICES = [(s, s.title()) for s in rulegen.RULE_SEVERITIES]


def _nul(what: str) -> str:
    return f"The {what} contains a NUL byte; remove it."


class RuleForm(forms.Form):
    title = forms.CharField(max_length=rulegen.MAX_TITLE, strip=True, error_messages={
        "required": "Give the rule a short title.",
        "max_length": f"Keep the title under {rulegen.MAX_TITLE} characters.",
        "null_characters_not_allowed": _nul("title")})
    text = forms.CharField(max_length=rulegen.MAX_TEXT, strip=True, error_messages={
        "required": "Write the rule: what a change must or must not do.",
        "max_length": f"Keep the rule under {rulegen.MAX_TEXT:,} characters.",
        "null_characters_not_allowed": _nul("rule")})
    path_glob = forms.CharField(max_length=globs.MAX_GLOB, strip=True, error_messages={
        "required": "Give a path glob, e.g. api/** (** alone is every file).",
        "max_length": f"Keep the path glob under {globs.MAX_GLOB} characters.",
        "null_characters_not_allowed": _nul("path glob")})
    severity = forms.ChoiceField(choices=SEVERITY_CHOICES, error_messages={
        "required": "Choose a severity.",
        "invalid_choice": "Choose critical, high, medium or low."})
    pattern = forms.CharField(required=False, strip=False, max_length=rulegen.MAX_PATTERN,
                              error_messages={
                                  "max_length": f"Keep the pattern under {rulegen.MAX_PATTERN} "
                                                "characters.",
                                  "null_characters_not_allowed": _nul("pattern")})
    scope = forms.ChoiceField(required=False, error_messages={
        "invalid_choice": "Choose all your reviews or one of your connections."})

    def __init__(self, *args, owner, rule: ReviewRule | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.owner, self.rule = owner, rule
        self.connections = {str(c.pk): c for c in Connection.objects.filter(owner=owner)}
        self.fields["scope"].choices = [("", "All my reviews"),
                                        *((k, str(c)) for k, c in self.connections.items())]

    def clean_path_glob(self):
        glob = self.cleaned_data["path_glob"]
        if error := globs.glob_error(glob):
            raise forms.ValidationError(error)
        return glob

    def clean_pattern(self):
        pattern = self.cleaned_data.get("pattern") or ""
        if pattern.strip() == "":
            return ""
        if error := rulegen.pattern_error(pattern):
            raise forms.ValidationError(error)
        return pattern

    def clean_scope(self):
        return self.connections.get(self.cleaned_data.get("scope") or "")

    def clean(self):
        data = super().clean()
        title = data.get("title")
        if title and not self.errors:
            same = (ReviewRule.objects.filter(owner=self.owner, connection=data.get("scope"))
                    .exclude(status=Status.RETIRED))
            if self.rule is not None:
                same = same.exclude(pk=self.rule.pk)
            wanted = rulegen.normal_title(title)
            clash = next((r for r in same if rulegen.normal_title(r.title) == wanted), None)
            if clash is not None:
                self.add_error("title", f"Rule #{clash.pk} has this title already; edit or "
                                        "retire that one instead.")
        return data

    def message(self) -> str:
        return " ".join(e for errs in self.errors.values() for e in errs)


def _groups(user) -> dict:
    rows = list(ReviewRule.objects.filter(owner=user).select_related("connection", "decided_by")
                .order_by("-id"))
    return {"pending": [r for r in rows if r.status == Status.PENDING],
            "active": [r for r in rows if r.status == Status.ACTIVE],
            "retired": [r for r in rows if r.status == Status.RETIRED],
            "connections": list(Connection.objects.filter(owner=user)),
            "severities": SEVERITY_CHOICES, "model": rules.generation_model()}


SUGGESTED_KEY = "quorum_rules_suggested"


def _page(request, *, status: int = 200, **extra):
    return render(request, PAGE, {**_groups(request.user), **extra}, status=status)


def _answer(request, rule: ReviewRule, *, status: int = 200, notice: str = "", error: str = "",
            form: RuleForm | None = None, moved: bool = False):
    """The rule's card (htmx), else back to the page (or the page with the message)."""
    if request.htmx:
        rule.refresh_from_db()
        ctx = {"r": rule, "notice": notice, "card_error": error, "form": form,
               "form_for": rule.pk, "moved": moved, "severities": SEVERITY_CHOICES,
               "connections": list(Connection.objects.filter(owner=request.user))}
        return render(request, f"{PAGE}#rule-card", ctx, status=status)
    if status >= 400:
        return _page(request, status=status, error=error, form=form, form_for=rule.pk)
    return redirect(reverse("review_rules") + f"#rule-{rule.pk}")


@login_required
@require_GET
def rule_list(request):
    # The outcome of "Suggest rules", carried over its redirect (post/redirect/get): a reload
    # then shows the page, not the form sent again.
    last = request.session.pop(SUGGESTED_KEY, None)
    if isinstance(last, dict):
        created = list(ReviewRule.objects.filter(owner=request.user,
                                                 pk__in=last.pop("created", [])))
        scope = Connection.objects.filter(owner=request.user, pk=last.pop("scope", 0) or 0)
        return _page(request, suggested=rules.Suggested(created=created, **last),
                     suggest_scope=scope.first())
    return _page(request)


@login_required
@require_POST
def rule_new(request):
    form = RuleForm(request.POST, owner=request.user)
    if not form.is_valid():  # a plain form (no htmx): the page again, with the message
        return _page(request, status=400, new_form=form,
                     new_error=f"The rule was not saved: {form.message()}")
    d = form.cleaned_data
    now = timezone.now()
    rule = ReviewRule.objects.create(
        owner=request.user, connection=d["scope"], title=d["title"], text=d["text"],
        path_glob=d["path_glob"], severity=d["severity"],
        matcher={"pattern": d["pattern"]} if d["pattern"] else {}, status=Status.ACTIVE,
        origin=ReviewRule.Origin.MANUAL, created_by=request.user, decided_by=request.user,
        decided_at=now)
    url = reverse("review_rules") + f"#rule-{rule.pk}"
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _change(request, pk: int, allowed: tuple[str, ...], to: str, done: str):
    rule, outcome = change_status(ReviewRule, pk, request.user, allowed, to)
    now = rule.get_status_display().lower()
    if outcome == "same":
        return _answer(request, rule, notice=f"Rule #{pk} is {now} already; nothing changed.")
    if outcome == "refused":
        return _answer(request, rule, status=409, error=(
            f"Rule #{pk} is {now}, so it cannot be {done.split(':')[0]}. Reload the page."))
    return _answer(request, rule, notice=f"Rule #{pk} {done}.", moved=True)


@login_required
@require_POST
def rule_approve(request, pk: int):
    return _change(request, pk, (Status.PENDING,), Status.ACTIVE,
                   "approved: the next reviews check it")


@login_required
@require_POST
def rule_retire(request, pk: int):
    return _change(request, pk, (Status.PENDING, Status.ACTIVE), Status.RETIRED,
                   "retired: reviews no longer check it, and it is not suggested again")


@login_required
@require_POST
def rule_restore(request, pk: int):
    return _change(request, pk, (Status.RETIRED,), Status.ACTIVE,
                   "restored: the next reviews check it again")


@login_required
@require_POST
def rule_delete(request, pk: int):
    rule = get_object_or_404(ReviewRule, pk=pk, owner=request.user)
    with transaction.atomic():
        rule = ReviewRule.objects.select_for_update().get(pk=rule.pk)
        if rule.status != Status.PENDING:
            return _answer(request, rule, status=409, error=(
                f"Rule #{pk} is {rule.get_status_display().lower()}: only a suggestion can "
                "be deleted. Retire it instead."))
        rule.delete()
    if request.htmx:
        return render(request, f"{PAGE}#rule-deleted", {"pk": pk})
    return redirect(reverse("review_rules") + "#rules-pending")


@login_required
@require_POST
def rule_edit(request, pk: int):
    rule = get_object_or_404(ReviewRule, pk=pk, owner=request.user)
    form = RuleForm(request.POST, owner=request.user, rule=rule)
    if not form.is_valid():
        return _answer(request, rule, status=400, form=form,
                       error=f"Rule #{pk} was not changed: {form.message()}")
    d = form.cleaned_data
    with transaction.atomic():
        rule = ReviewRule.objects.select_for_update().get(pk=rule.pk)
        rule.title, rule.text, rule.path_glob = d["title"], d["text"], d["path_glob"]
        rule.severity, rule.connection = d["severity"], d["scope"]
        rule.matcher = {**(rule.matcher or {}), "pattern": d["pattern"]} if d["pattern"] \
            else {k: v for k, v in (rule.matcher or {}).items() if k != "pattern"}
        rule.save(update_fields=["title", "text", "path_glob", "severity", "connection",
                                 "matcher"])
    return _answer(request, rule, notice=f"Rule #{pk} saved.")


@login_required
@require_POST
def rule_suggest(request):
    raw = (request.POST.get("scope") or "").strip()
    connection = None
    if raw:
        connection = Connection.objects.filter(
            owner=request.user, pk=int(raw) if raw.isdigit() and len(raw) < 19 else 0).first()
        if connection is None:
            return _page(request, status=400, suggest_error=(
                "Choose all your reviews or one of your connections."))
    out = rules.start_suggest(request.user, connection, user=request.user)
    if request.htmx:
        return _page(request, suggested=out, suggest_scope=connection)
    request.session[SUGGESTED_KEY] = {
        "created": [r.pk for r in out.created], "duplicates": out.duplicates,
        "material": out.material, "model": out.model, "offline": out.offline,
        "queued": out.queued, "error": out.error,
        "scope": connection.pk if connection else None}
    return redirect(reverse("review_rules") + "#suggested")
