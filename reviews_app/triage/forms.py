"""Forms of triage on the review page. Every rejection says what was wrong and what to do."""

from __future__ import annotations

from django import forms

from ..models import Finding, RejectReason, Verdict
from ..pipeline.schema import SEVERITIES


class FindingDecisionForm(forms.Form):
    # A reason button ("Wrong", "Intended"…) sends only ``reason``: it rejects.
    decision = forms.ChoiceField(choices=Finding.Decision.choices, required=False)
    reason = forms.ChoiceField(choices=RejectReason.choices, required=False)
    comment = forms.CharField(required=False, max_length=4000)
    # The state the page showed: a stale page is told so instead of overwriting.
    seen = forms.ChoiceField(choices=Finding.Decision.choices, required=False)
    # Where it was sent from: the finding's thread on the diff, or its card in the list.
    view = forms.ChoiceField(choices=[("diff", "Diff"), ("list", "List")], required=False)

    def clean(self):
        data = super().clean()
        if not data.get("decision") and data.get("reason"):
            data["decision"] = Finding.Decision.REJECTED
        if not self.errors and not data.get("decision"):
            self.add_error("decision", "Accept or reject the finding.")
        return data

    def error_text(self) -> str:
        """What was wrong, in words (the page shows it on the finding's card)."""
        if "reason" in self.errors:
            why = ("the reason is not one of wrong, not important here, intended, duplicate "
                   "or other")
        elif "comment" in self.errors:
            why = ("the comment contains a NUL byte" if "\x00" in self.data.get("comment", "")
                   else "the comment is too long: keep it under 4,000 characters")
        elif "view" in self.errors:
            why = "it came from no part of the page; reload the page and try again"
        else:
            why = "accept or reject the finding"
        return f"That decision could not be read: {why}. Nothing changed."


class SettleRestForm(forms.Form):
    decision = forms.ChoiceField(choices=[(Finding.Decision.ACCEPTED, "Accept"),
                                          (Finding.Decision.REJECTED, "Reject")])
    # The pending findings the page listed, comma-separated: another set means a stale page.
    seen = forms.CharField(required=False, max_length=20_000)

    def seen_keys(self) -> list[str] | None:
        if "seen" not in self.data:
            return None
        return [k for k in self.cleaned_data["seen"].split(",") if k]


class ReopenForm(forms.Form):
    note = forms.CharField(required=False, max_length=4000, strip=True)


class AcceptAllForm(forms.Form):
    severity = forms.ChoiceField(choices=[(s, s) for s in SEVERITIES])


class VerdictForm(forms.Form):
    action = forms.ChoiceField(choices=[("accept", "Accept"), ("override", "Override")])
    verdict = forms.ChoiceField(choices=Verdict.choices, required=False)
    reason = forms.CharField(required=False, max_length=4000)
    seq = forms.IntegerField(min_value=0)
    # The accepted critical findings the person confirmed approving over (keys, comma-separated).
    confirm_critical = forms.CharField(required=False, max_length=2000)

    def confirmed_keys(self) -> list[str]:
        text = self.cleaned_data.get("confirm_critical") or ""
        return [k for k in text.replace(",", " ").split() if k]
