"""The form of a team's gate rule, and a rule in words.

A rule names a pattern (one of ``PATTERNS``) and a gate (one a pattern stops at: the
patterns' ``gates``, and every ``awaiting_<gate>`` status), either empty for "any"; globs on
the repository and on changed paths (git's wildmatch, checked with pathspec when installed,
else with fnmatch); how many approvals pass it and rejections end it; whom it is assigned
to; and a deadline with a reminder, an escalation and what happens when it passes."""

from __future__ import annotations

import fnmatch
import re

from django import forms
from django.contrib.auth import get_user_model

from ..models import Status
from ..patterns import PATTERNS
from ..patterns.gate_input import control_message
from ..teams.models import Team
from ..teams.services import approvers
from .models import DefaultAction, GateRule

MAX_GLOBS = 50
MAX_GLOB = 300
MAX_COUNT = 20  # approvals, rejections
MAX_DEADLINE = 525_600  # minutes: a year


def gate_names() -> dict[str, str]:
    """Every gate a run can stop at → its words ("merge request"). The patterns name their
    gates (``Pattern.gates``); the run statuses ``awaiting_<gate>`` add the built-in ones."""
    names = {}
    for status in Status.values:
        if status.startswith("awaiting_"):
            names[status.removeprefix("awaiting_")] = ""
    for pattern in PATTERNS.values():
        for gate in pattern.gates:
            names.setdefault(gate, "")
    return {gate: gate.replace("_", " ") for gate in sorted(names)}


def pattern_names() -> dict[str, str]:
    return {name: (p.label or name.replace("_", " ")) for name, p in PATTERNS.items()}


def glob_problem(glob: str) -> str:
    """Why ``glob`` is not a valid wildmatch pattern, or ""."""
    try:
        import pathspec
    except ImportError:  # pragma: no cover - pathspec comes with the test tools
        try:
            re.compile(fnmatch.translate(glob))
        except re.error as exc:
            return str(exc)
        return ""
    try:
        pathspec.lookup_pattern("gitignore")(glob)
    except ValueError as exc:  # GitIgnorePatternError
        return str(exc)
    return ""


def _check_glob(glob: str, where: str) -> None:
    if len(glob) > MAX_GLOB:
        raise forms.ValidationError(f"{where} is {len(glob):,} characters long: a glob may "
                                    f"have at most {MAX_GLOB}.")
    if problem := glob_problem(glob):
        raise forms.ValidationError(f"{where} is not a valid glob ({problem}); for example "
                                    "acme/* or src/**/*.py.")


def _no_controls(value: str, what: str) -> str:
    if message := control_message(what, value):
        raise forms.ValidationError(message)
    return value


def _count(label: str, initial: int) -> forms.IntegerField:
    return forms.IntegerField(min_value=1, max_value=MAX_COUNT, initial=initial, label=label)


def _minutes(label: str, help_text: str) -> forms.IntegerField:
    return forms.IntegerField(min_value=1, max_value=MAX_DEADLINE, required=False,
                              label=label, help_text=help_text)


class GateRuleForm(forms.ModelForm):
    name = forms.CharField(max_length=100, label="Name",
                           error_messages={"required": "Give the rule a name."})
    pattern = forms.ChoiceField(required=False, label="Pattern")
    gate = forms.ChoiceField(required=False, label="Gate")
    repository = forms.CharField(required=False, label="Repositories matching",
                                 help_text="A glob such as acme/*; empty: any repository.")
    paths = forms.CharField(required=False, label="Changed paths matching",
                            widget=forms.Textarea(attrs={"rows": 3}),
                            help_text=f"Globs, one per line (at most {MAX_GLOBS}); the rule "
                                      "applies when any changed file matches one. Empty: any.")
    required_approvals = _count("Approvals needed", 1)
    rejections_to_reject = _count("Rejections that reject", 1)
    deadline_minutes = _minutes("Deadline (minutes)", "Empty: no deadline.")
    remind_minutes_before = _minutes("Remind (minutes before the deadline)", "")
    escalate_minutes_before = _minutes("Escalate (minutes before the deadline)", "")
    default_action = forms.ChoiceField(
        required=False, label="When the deadline passes",
        choices=[("", "Nothing: keep waiting"), *DefaultAction.choices])

    class Meta:
        model = GateRule
        fields = ["name", "pattern", "gate", "repository", "paths", "required_approvals",
                  "exclude_initiator", "rejections_to_reject", "assign_user", "assign_team",
                  "use_codeowners", "deadline_minutes", "remind_minutes_before",
                  "escalate_minutes_before", "escalate_to", "default_action"]
        labels = {"exclude_initiator": "The person who started the run may not approve it",
                  "assign_user": "Assign to a member", "assign_team": "Assign to a team",
                  "use_codeowners": "Also assign to the code owners of the changed files",
                  "escalate_to": "Escalate to the team"}

    def __init__(self, *args, team: Team, editor=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.team = team
        self.fields["pattern"].choices = [("", "Any pattern"), *pattern_names().items()]
        self.fields["gate"].choices = [("", "Any gate"), *gate_names().items()]
        members = get_user_model().objects.filter(memberships__team=team).order_by("username")
        user = self.fields["assign_user"]
        user.queryset = members
        user.label_from_instance = lambda u: u.get_username()
        user.error_messages["invalid_choice"] = (f"Assign the gate to a member of {team.name} "
                                                 "(that person is not one).")
        self.fields["assign_team"].error_messages["invalid_choice"] = "No such team."
        escalate = self.fields["escalate_to"]
        escalate.queryset = Team.objects.exclude(pk=team.pk)
        if editor is not None:
            # Only the teams the rule's editor belongs to (and those the rule names already):
            # no other team's name is shown to them.
            theirs = Team.objects.filter(memberships__user=editor)
            kept = [pk for pk in (self.instance.escalate_to_id, self.instance.assign_team_id) if pk]
            known = Team.objects.filter(pk__in=theirs.values("pk")) | Team.objects.filter(
                pk__in=kept)
            escalate.queryset = known.exclude(pk=team.pk).distinct().order_by("name")
            self.fields["assign_team"].queryset = known.distinct().order_by("name")
        escalate.error_messages["invalid_choice"] = (
            f"Escalate to another existing team (not {team.name} itself).")
        for name in ("pattern", "gate"):
            self.fields[name].error_messages["invalid_choice"] = (
                f"%(value)s is not a {name} Quorum knows: choose one from the list, or leave "
                "it empty for any.")

    def clean_name(self) -> str:
        name = _no_controls(self.cleaned_data["name"], "The name")
        twins = GateRule.objects.filter(team=self.team, name__iexact=name)
        if self.instance.pk:
            twins = twins.exclude(pk=self.instance.pk)
        if twins.exists():
            raise forms.ValidationError(f"{self.team.name} has a rule named {name!r} already: "
                                        "choose another name, or edit that rule.")
        return name

    def clean_repository(self) -> str:
        value = _no_controls(self.cleaned_data["repository"], "The repository glob")
        if value:
            _check_glob(value, "The repository glob")
        return value

    def clean_paths(self) -> str:
        value = _no_controls(self.cleaned_data["paths"], "The path globs")
        lines = [line.strip() for line in value.splitlines() if line.strip()]
        if len(lines) > MAX_GLOBS:
            raise forms.ValidationError(f"Give at most {MAX_GLOBS} path globs (one per line); "
                                        f"there are {len(lines):,}.")
        for number, line in enumerate(lines, 1):
            _check_glob(line, f"Line {number} of the path globs")
        return "\n".join(lines)

    def clean(self):
        data = super().clean()
        pattern, gate = data.get("pattern"), data.get("gate")
        if pattern in PATTERNS:
            gates = PATTERNS[pattern].gates
            label = pattern_names()[pattern]
            if not gates:
                self.add_error("pattern", f"{label} runs never stop at a gate: a rule for them "
                                          "would never apply.")
            elif gate and gate not in gates:
                self.add_error("gate", f"{label} runs have no {gate.replace('_', ' ')} gate; "
                                       "theirs: " + ", ".join(g.replace("_", " ") for g in gates)
                                       + ".")
        k = data.get("required_approvals")
        if k is not None and k > (n := approvers(self.team)):
            self.add_error("required_approvals", (
                f"{self.team.name} has {n} approver{'s' if n != 1 else ''} (members with the "
                f"approver or admin role): a gate needing {k} approvals could never pass. "
                "Give more members the approver role first, or ask for fewer approvals."))
        deadline = data.get("deadline_minutes")
        for field, what in (("remind_minutes_before", "A reminder"),
                            ("escalate_minutes_before", "An escalation")):
            before = data.get(field)
            if before is None:
                continue
            if deadline is None:
                self.add_error(field, f"{what} comes before a deadline: set the deadline too.")
            elif before >= deadline:
                self.add_error(field, f"{what} must come before the deadline: less than "
                                      f"{deadline} minutes before it.")
        if data.get("escalate_minutes_before") is not None and not data.get("escalate_to") \
                and "escalate_to" not in self.errors:
            self.add_error("escalate_to", "Choose the team to escalate to.")
        if data.get("escalate_to") and data.get("escalate_minutes_before") is None \
                and "escalate_minutes_before" not in self.errors:
            self.add_error("escalate_minutes_before", "Say how many minutes before the "
                                                      "deadline to escalate.")
        if data.get("default_action") and deadline is None \
                and "deadline_minutes" not in self.errors:
            self.add_error("default_action", "What happens when the deadline passes needs a "
                                             "deadline: set one, or choose “Nothing”.")
        return data


def _minutes_words(n: int) -> str:
    return f"{n:,} min"


def describe(rule: GateRule) -> str:
    """The rule in one sentence: "Plan, execute, review (git) runs' merge request gate in
    repositories matching acme/*: 2 approvals, initiator excluded; deadline 60 min: remind
    15 min before, escalate to Security 5 min before, then reject"."""
    gate = f"{rule.gate.replace('_', ' ')} gate" if rule.gate else "gates"
    if rule.pattern:
        subject = f"{pattern_names().get(rule.pattern, rule.pattern)} runs' {gate}"
    else:
        subject = f"Every pattern's {gate}" if rule.gate else "Every gate of every pattern"
    where = []
    if rule.repository:
        where.append(f"in repositories matching {rule.repository}")
    if globs := [g for g in rule.paths.splitlines() if g.strip()]:
        shown = ", ".join(globs[:3]) + (f" and {len(globs) - 3} more" if len(globs) > 3 else "")
        where.append(f"when a changed path matches {shown}")
    k = rule.required_approvals
    what = [f"{k} approval{'s' if k != 1 else ''}"]
    if rule.exclude_initiator:
        what.append("initiator excluded")
    if rule.rejections_to_reject != 1:
        what.append(f"{rule.rejections_to_reject} rejections reject")
    assigned = []
    if rule.assign_user_id:
        assigned.append(rule.assign_user.get_username())
    if rule.assign_team_id:
        assigned.append(f"team {rule.assign_team.name}")
    if rule.use_codeowners:
        assigned.append("the code owners")
    if assigned:
        what.append("assigned to " + " and ".join(assigned))
    text = " ".join([subject, *where]) + ": " + ", ".join(what)
    if rule.deadline_minutes:
        steps = []
        if rule.remind_minutes_before:
            steps.append(f"remind {_minutes_words(rule.remind_minutes_before)} before")
        if rule.escalate_minutes_before and rule.escalate_to_id:
            steps.append(f"escalate to {rule.escalate_to.name} "
                         f"{_minutes_words(rule.escalate_minutes_before)} before")
        action = {DefaultAction.APPROVE: "approve", DefaultAction.REJECT: "reject",
                  DefaultAction.CANCEL: "cancel the run"}.get(rule.default_action)
        steps.append(f"then {action}" if action else "then keep waiting")
        text += f"; deadline {_minutes_words(rule.deadline_minutes)}: " + ", ".join(steps)
    return text
