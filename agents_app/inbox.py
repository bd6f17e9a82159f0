"""The inbox (issue 35, its first part): every gate waiting for the signed-in person, across
runs, patterns and reviews — what is to be decided, with its context (the plan and what
changed from the previous version, the branch of a merge request, the cost so far) — newest
decisions first to be made oldest first. Read from the runs themselves (a run at a gate is
``awaiting_<gate>``), so a gate appears the moment its run stops there and leaves the moment
it is decided, on any page or device. Teams, assignment and k-of-n approvals build on it."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.utils import timezone

from .models import PlanVersion, Run, gate_status_labels, status_groups
from .teams.access import visible

MAX_CARDS = 200


def waiting_statuses() -> list[str]:
    return next(statuses for key, _, statuses in status_groups() if key == "all_waiting")


def count(user) -> int:
    return visible(Run.objects, user).filter(status__in=waiting_statuses()).count()


@dataclass
class Card:
    run: Run
    gate: str
    words: str
    waiting_since: Any
    plan: PlanVersion | None = None
    plan_diff: list[tuple[str, str]] = field(default_factory=list)  # (kind, line)

    @property
    def age_minutes(self) -> int:
        return int((timezone.now() - self.waiting_since).total_seconds() // 60)


@dataclass
class Filters:
    gate: str = ""
    pattern: str = ""
    older_than_hours: float | None = None
    min_cost: Decimal | None = None
    problems: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, params) -> Filters:
        f = cls(gate=(params.get("gate") or "")[:60], pattern=(params.get("pattern") or "")[:60])
        age = (params.get("older_than") or "").strip()
        if age:
            try:
                f.older_than_hours = float(age)
                if not 0 <= f.older_than_hours <= 24 * 365:
                    raise ValueError
            except ValueError:
                f.older_than_hours = None
                f.problems.append("“Waiting longer than” takes a number of hours (0 to "
                                  "8,760); it was ignored.")
        cost = (params.get("min_cost") or "").strip()
        if cost:
            try:
                f.min_cost = Decimal(cost)
                if not f.min_cost.is_finite() or f.min_cost < 0:
                    raise InvalidOperation
            except InvalidOperation:
                f.min_cost = None
                f.problems.append("“Cost so far at least” takes an amount in USD; it was "
                                  "ignored.")
        return f


def cards(user, filters: Filters) -> list[Card]:
    runs = visible(Run.objects, user).filter(status__in=waiting_statuses())
    if filters.gate:
        runs = runs.filter(gate=filters.gate)
    if filters.pattern:
        runs = runs.filter(pattern=filters.pattern)
    if filters.older_than_hours is not None:
        runs = runs.filter(updated_at__lte=timezone.now()
                           - timedelta(hours=filters.older_than_hours))
    if filters.min_cost is not None:
        runs = runs.filter(cost_usd__gte=filters.min_cost)
    runs = list(runs.defer("state").select_related("merge_request")
                .order_by("updated_at", "id")[:MAX_CARDS])
    words = gate_status_labels()
    plans: dict[int, list[PlanVersion]] = {}
    for pv in PlanVersion.objects.filter(run__in=[r for r in runs if r.gate.endswith(
            "plan_approval")]).order_by("run_id", "-version"):
        plans.setdefault(pv.run_id, []).append(pv)
    out = []
    for run in runs:
        card = Card(run, run.gate, words.get(run.status) or run.get_status_display(),
                    run.updated_at)
        versions = plans.get(run.pk, [])
        if versions:
            card.plan = versions[0]
            if len(versions) > 1:
                card.plan_diff = _diff(versions[1].steps, versions[0].steps)
        out.append(card)
    return out


def _diff(before: list[str], after: list[str]) -> list[tuple[str, str]]:
    """The steps that changed between two plan versions, as (kind, line) for the card."""
    out = []
    for line in difflib.unified_diff([str(s) for s in before], [str(s) for s in after],
                                     lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        out.append(("add" if line.startswith("+") else "del", line[1:]))
    return out


MAX_BATCH = 200


@dataclass
class Outcome:
    run_id: int
    done: bool
    words: str


def decide_many(user, picks: list[str], action: str, feedback: str) -> list[Outcome]:
    """The same decision at each ticked gate, each taken and recorded on its own, as the run
    page's form would take it: a gate that moved on since the inbox showed it (another person,
    another tab) is left as it is and said so; one the pattern refuses that decision at (a
    merge needs its message and method, a question its answer) is named with the reason."""
    from .engine import StaleDecision, decide
    from .gates.core import NotAllowed
    from .patterns.base import Decision, InvalidDecision

    out: list[Outcome] = []
    seen: set[int] = set()
    for pick in picks[:MAX_BATCH]:
        pk_text, _, seq_text = pick.partition(":")
        if not (pk_text.isdigit() and seq_text.isdigit()) or len(pick) > 40:
            continue
        pk, seq = int(pk_text), int(seq_text)
        if pk in seen:
            continue
        seen.add(pk)
        run = visible(Run.objects, user).filter(pk=pk).first()
        if run is None:
            out.append(Outcome(pk, False, f"Run {pk}: not found."))
            continue
        try:
            run = decide(run, user, seq, Decision(action=action, feedback=feedback,
                                                  author=user.get_username()),
                         channel="batch")
        except NotAllowed as exc:
            out.append(Outcome(pk, False, f"Run {pk}: {exc}"))
        except StaleDecision:
            out.append(Outcome(pk, False, f"Run {pk}: it moved on before this was sent "
                                          "(decided elsewhere, or cancelled); left as it is."))
        except InvalidDecision as exc:
            out.append(Outcome(pk, False, f"Run {pk}: {exc} Decide it on its page."))
        else:
            if note := getattr(run, "vote_note", ""):
                out.append(Outcome(pk, True, f"Run {pk}: {note}"))
                continue
            words = "approved" if action == "approve" else "rejected with your feedback"
            out.append(Outcome(pk, True, f"Run {pk}: {words}."))
    return out
