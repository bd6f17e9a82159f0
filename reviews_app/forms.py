"""Forms of the review pages. Every rejection says what was wrong and what to do."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.core.validators import ProhibitNullCharactersValidator

from agents_app.forms import check_models
from agents_app.models import Status

from . import services
from .models import Review, Verdict


class _MultipleFileInput(forms.FileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one field (Django's documented recipe): a list, maybe empty."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", _MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        one = super().clean
        if isinstance(data, list | tuple):
            return [one(d, initial) for d in data if d]
        return [one(data, initial)] if data else []


MAX_SARIF_FILES = 10


class DiffTextField(forms.CharField):
    """A text field that takes NUL characters (Django's CharField refuses them)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.validators = [v for v in self.validators
                           if not isinstance(v, ProhibitNullCharactersValidator)]


class NewReviewForm(forms.Form):
    source = forms.ChoiceField(choices=Review.Source.choices, initial="paste",
                               widget=forms.RadioSelect)
    # A pasted diff may hold NUL characters like an uploaded one: both are reviewed with them
    # replaced, and the coverage says so (services.replace_nul).
    diff = DiffTextField(required=False, strip=False, label="Unified diff",
                           widget=forms.Textarea(attrs={
                               "rows": 12, "spellcheck": "false",
                               "placeholder": "Paste the output of `git diff` here."}))
    upload = forms.FileField(required=False, label=".diff or .patch file")
    repo = forms.CharField(required=False, max_length=1000, label="Repository path")
    range = forms.CharField(required=False, max_length=420, label="Range",
                            widget=forms.TextInput(attrs={"placeholder": "main..feature"}))
    pr_url = forms.CharField(required=False, max_length=500, label="Pull request URL",
                             widget=forms.TextInput(attrs={
                                 "placeholder": "https://github.com/owner/repo/pull/123"}))
    model_security = forms.CharField(required=False, max_length=200, label="Security reviewer")
    model_architecture = forms.CharField(required=False, max_length=200,
                                         label="Architecture reviewer")
    model_style = forms.CharField(required=False, max_length=200, label="Style reviewer")
    model_checker = forms.CharField(required=False, max_length=200,
                                    label="Cross-file and rules checker")
    model_verifier = forms.CharField(required=False, max_length=200,
                                     label="Finding verifier")
    model_synthesizer = forms.CharField(required=False, max_length=200, label="Synthesizer")
    sarif = MultipleFileField(required=False, label="Analyzer results (SARIF)",
                              help_text="SARIF 2.1.0 files from CodeQL, ESLint, gitleaks, "
                                        "Semgrep or another analyzer: used as evidence.")
    min_confidence = forms.FloatField(required=False, min_value=0, max_value=1,
                                      label="Confidence threshold",
                                      widget=forms.NumberInput(attrs={"step": "0.05"}))

    ROLE_FIELDS = {"security": "model_security", "architecture": "model_architecture",
                   "style": "model_style", "checker": "model_checker",
                   "verifier": "model_verifier", "synthesizer": "model_synthesizer"}

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        from agents_app.teams.fields import add_team_field

        add_team_field(self, user)
        for role, name in self.ROLE_FIELDS.items():
            default = settings.QUORUM_ROLE_MODELS[role]
            self.fields[name].widget.attrs["placeholder"] = default
        self.fields["min_confidence"].widget.attrs["placeholder"] = \
            settings.QUORUM_REVIEW_MIN_CONFIDENCE
        roots = settings.QUORUM_REPO_ROOTS
        self.fields["repo"].widget.attrs["placeholder"] = (roots[0] + "/…" if roots else
                                                           "Set QUORUM_REPO_ROOTS first")
        self.review_input: services.ReviewInput | None = None
        self.prepared = None
        self.imported: dict = {}  # start_review options with the imported SARIF evidence

    def clean(self):
        data = super().clean()
        check_models(self, data, self.ROLE_FIELDS.values())
        if self.errors:
            return data
        try:
            self.imported = self._imported(data.get("sarif") or [])
        except services.InputError as exc:
            self.add_error("sarif", str(exc))
            return data  # a refused SARIF file starts nothing, not even loading the change
        try:
            self.review_input = self._load(data)
            self.prepared = services.prepare(self.review_input)
        except services.InputError as exc:
            field = {"paste": "diff", "upload": "upload", "git": "repo",
                     "github": "pr_url"}[data["source"]]
            self.add_error(field, str(exc))
        return data

    @staticmethod
    def _imported(uploads) -> dict:
        if not uploads:
            return {}
        if len(uploads) > MAX_SARIF_FILES:
            raise services.InputError(f"Upload at most {MAX_SARIF_FILES} SARIF files.")
        named = []
        for f in uploads:
            name = "".join(c for c in str(f.name or "")[:100] if c.isprintable()) or "SARIF file"
            if error := services.too_big(name, f.size or 0):
                raise error
            named.append((name, f.read()))
        evidence, notes = services.imported_evidence(named)
        return {"imported": evidence, "imported_notes": notes}

    def _load(self, data) -> services.ReviewInput:
        kind = data["source"]
        if kind == "paste":
            if not (data.get("diff") or "").strip():
                raise services.InputError("Paste a diff, or choose another source.")
            return services.from_text(data["diff"])
        if kind == "upload":
            if not data.get("upload"):
                raise services.InputError("Choose a .diff or .patch file to upload.")
            return services.from_upload(data["upload"])
        if kind == "git":
            if not (data.get("repo") or "").strip() or not (data.get("range") or "").strip():
                raise services.InputError("Give the repository path and a range like "
                                          "main..feature.")
            return services.from_git(data["repo"].strip(), data["range"].strip())
        if not (data.get("pr_url") or "").strip():
            raise services.InputError("Give the URL of a GitHub pull request.")
        return services.from_github(data["pr_url"].strip())

    def models(self) -> dict[str, str]:
        d = self.cleaned_data
        return {role: (d.get(name) or "").strip() or settings.QUORUM_ROLE_MODELS[role]
                for role, name in self.ROLE_FIELDS.items()}


class ExportForm(forms.Form):
    format = forms.ChoiceField(choices=[("markdown", "Markdown"), ("json", "JSON"),
                                        ("sarif", "SARIF 2.1.0")], initial="markdown")
    scope = forms.ChoiceField(choices=[("all", "All findings"),
                                       ("accepted", "Accepted findings")],
                              required=False, initial="all")


REVIEW_STATUSES = [s for s in Status.choices if s[0] not in (
    "planning", "awaiting_plan_approval", "executing")]


class ReviewFilterForm(forms.Form):
    status = forms.ChoiceField(choices=[("", "Any status"), *REVIEW_STATUSES], required=False)
    verdict = forms.ChoiceField(choices=[("", "Any verdict"), *Verdict.choices], required=False)
    source = forms.ChoiceField(choices=[("", "Any source"), *Review.Source.choices],
                               required=False)
    q = forms.CharField(required=False, max_length=200, label="Search")
    before = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)
