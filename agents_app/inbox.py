"""The inbox (issue 35): every gate waiting for the signed-in person or their teams, across
runs, patterns and reviews — what is to be decided with its context (the plan and what changed
from the previous version, a merge request's diff stat, the approvals so far and who is left,
the deadline, the cost so far) — oldest first. Read from the runs themselves (a run at a gate
is ``awaiting_<gate>``) and their open stops (``GateOpening``): a gate appears the moment its
run stops there and leaves the moment it is decided, on any page or device; open pages are
told over a WebSocket (``inbox_live.py``)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db.models import Q
from django.utils import timezone

from .models import AgentReport, PlanVersion, Run, gate_status_labels, status_groups
from .teams.access import team_ids, visible

MAX_CARDS = 200
SCOPES = (("decide", "Waiting for my decision"), ("all", "Everything my teams are waiting on"))
ASSIGNEES = (("", "anyone"), ("me", "assigned to me"), ("unassigned", "assigned to nobody"))


def waiting_statuses() -> list[str]:
    return next(statuses for key, _, statuses in status_groups() if key == "all_waiting")


def decidable_q(user) -> Q:
    """Waiting runs this person may decide: their personal ones, their deciding teams', and
    those assigned or escalated to them or to a team where they decide. (A rule excluding
    the initiator is checked when they decide; the card says so.)"""
    from .gates.models import GateOpening

    deciding = team_ids(user, deciding=True)
    # Subqueries, not a join of every run's stops: no row is repeated (no DISTINCT), and the
    # database reads the open stops alone (bench_inbox.py: 1,000,000 runs).
    assigned = GateOpening.objects.filter(closed_at__isnull=True).filter(
        Q(assignee_user=user) | Q(assignee_team__in=deciding)).values("run_id")
    return Q(team__isnull=True, owner=user) | Q(team__in=deciding) | Q(pk__in=assigned)


def _open_stops(**where) -> Any:
    """The ids of runs with an open stop matching ``where``, as a subquery."""
    from .gates.models import GateOpening

    return GateOpening.objects.filter(closed_at__isnull=True, **where).values("run_id")


def count(user) -> int:
    return visible(Run.objects, user).filter(status__in=waiting_statuses()).filter(
        decidable_q(user)).count()


@dataclass
class Card:
    run: Run
    gate: str
    words: str
    waiting_since: Any
    plan: PlanVersion | None = None
    plan_diff: list[tuple[str, str]] = field(default_factory=list)  # (kind, line)
    stop: Any = None  # the open GateOpening
    tally: Any = None
    can_decide: bool = False
    excluded: bool = False  # the initiator, where the rule asks for others' approvals
    diff_stat: tuple[int, int, int] | None = None  # files, lines added, lines removed

    @property
    def age_minutes(self) -> int:
        return int((timezone.now() - self.waiting_since).total_seconds() // 60)

    @property
    def deadline_minutes(self) -> int | None:
        if self.stop is None or self.stop.deadline_at is None:
            return None
        return int((self.stop.deadline_at - timezone.now()).total_seconds() // 60)


@dataclass
class Filters:
    gate: str = ""
    pattern: str = ""
    scope: str = "decide"
    team: str = ""  # a team's id, "personal", or "" for any
    assignee: str = ""
    due_within_hours: float | None = None
    older_than_hours: float | None = None
    min_cost: Decimal | None = None
    problems: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, params) -> Filters:
        f = cls(gate=(params.get("gate") or "")[:60], pattern=(params.get("pattern") or "")[:60])
        scope = params.get("scope") or "decide"
        f.scope = scope if scope in dict(SCOPES) else "decide"
        team = (params.get("team") or "")[:20]
        f.team = team if team == "personal" or team.isdigit() else ""
        assignee = params.get("assignee") or ""
        f.assignee = assignee if assignee in dict(ASSIGNEES) else ""
        for name, given, kept in (("Show", scope, f.scope), ("Team", team, f.team),
                                  ("Assignee", assignee, f.assignee)):
            if given and given != kept:
                f.problems.append(f"“{name}” had a value this page does not offer; it was "
                                  "ignored.")
        f.older_than_hours = f._hours(params, "older_than", "“Waiting longer than”")
        f.due_within_hours = f._hours(params, "due_within", "“Deadline within”")
        cost = (params.get("min_cost") or "").strip()
        if cost:
            try:
                f.min_cost = Decimal(cost[:40])
                if not f.min_cost.is_finite() or f.min_cost < 0:
                    raise InvalidOperation
            except InvalidOperation:
                f.min_cost = None
                f.problems.append("“Cost so far at least” takes an amount in USD; it was "
                                  "ignored.")
        return f

    def _hours(self, params, name: str, label: str) -> float | None:
        text = (params.get(name) or "").strip()[:40]
        if not text:
            return None
        try:
            hours = float(text)
            if not 0 <= hours <= 24 * 365:
                raise ValueError
        except ValueError:
            self.problems.append(f"{label} takes a number of hours (0 to 8,760); it was "
                                 "ignored.")
            return None
        return hours

    @property
    def narrowed(self) -> bool:
        """Whether a card pushed to the page must be checked against more than its kind,
        pattern and team (the page then reloads its list instead)."""
        return bool(self.assignee or self.due_within_hours is not None
                    or self.older_than_hours is not None or self.min_cost is not None)


def cards(user, filters: Filters) -> list[Card]:
    runs = visible(Run.objects, user).filter(status__in=waiting_statuses())
    if filters.scope == "decide":
        runs = runs.filter(decidable_q(user))
    if filters.gate:
        runs = runs.filter(gate=filters.gate)
    if filters.pattern:
        runs = runs.filter(pattern=filters.pattern)
    if filters.team == "personal":
        runs = runs.filter(team__isnull=True)
    elif filters.team:
        runs = runs.filter(team_id=int(filters.team))
    if filters.older_than_hours is not None:
        runs = runs.filter(updated_at__lte=timezone.now()
                           - timedelta(hours=filters.older_than_hours))
    if filters.min_cost is not None:
        runs = runs.filter(cost_usd__gte=filters.min_cost)
    if filters.assignee == "me":
        runs = runs.filter(pk__in=_open_stops(assignee_user=user))
    elif filters.assignee == "unassigned":
        runs = runs.exclude(Q(openings__closed_at__isnull=True) & (
            Q(openings__assignee_user__isnull=False) | Q(openings__assignee_team__isnull=False)))
    if filters.due_within_hours is not None:
        runs = runs.filter(pk__in=_open_stops(deadline_at__lte=(
            timezone.now() + timedelta(hours=filters.due_within_hours))))
    runs = list(runs.defer("state").select_related("merge_request", "team")
                .order_by("updated_at", "id")[:MAX_CARDS])
    return build(user, runs)


def build(user, runs: list[Run]) -> list[Card]:
    """The cards of ``runs`` (waiting), as ``user`` sees them (None: for nobody in particular,
    a card pushed to every watcher)."""
    from .gates import core
    from .gates.models import GateOpening

    words = gate_status_labels()
    plans: dict[int, list[PlanVersion]] = {}
    for pv in PlanVersion.objects.filter(run__in=[r for r in runs if r.gate.endswith(
            "plan_approval")]).order_by("run_id", "-version"):
        plans.setdefault(pv.run_id, []).append(pv)
    by_id = {r.pk: r for r in runs}
    stops = {s.run_id: s for s in GateOpening.objects.filter(
        run__in=runs, closed_at__isnull=True).select_related(
        "assignee_user", "assignee_team").order_by("opened_seq")}
    for stop in stops.values():  # the run already read, not again with its state
        stop.run = by_id[stop.run_id]
    stats = _diff_stats([r for r in runs if r.gate == "merge_request"])
    tallies = core.tallies(stops.values())
    deciding = set(team_ids(user, deciding=True).values_list("team_id", flat=True)) \
        if user is not None else set()
    out = []
    for run in runs:
        card = Card(run, run.gate, words.get(run.status) or run.get_status_display(),
                    run.updated_at, stop=stops.get(run.pk), diff_stat=stats.get(run.pk))
        versions = plans.get(run.pk, [])
        if versions:
            card.plan = versions[0]
            if len(versions) > 1:
                card.plan_diff = _diff(versions[1].steps, versions[0].steps)
        if card.stop is not None:
            card.tally = tallies[card.stop.pk]
        if user is not None:
            stop = card.stop
            card.can_decide = (run.team_id is None and run.owner_id == user.pk) or (
                run.team_id in deciding) or (stop is not None and (
                    stop.assignee_user_id == user.pk or stop.assignee_team_id in deciding))
            card.excluded = bool(stop is not None and (stop.policy or {}).get(
                "exclude_initiator") and run.owner_id == user.pk)
        out.append(card)
    return out


def _diff_stats(runs: list[Run]) -> dict[int, tuple[int, int, int]]:
    """Files, lines added and removed of each merge request's latest diff (unidiff)."""
    if not runs:
        return {}
    from unidiff import PatchSet
    from unidiff.errors import UnidiffParseError

    out = {}
    latest = {}
    for report in AgentReport.objects.filter(run__in=runs).exclude(diff="").only(
            "run_id", "diff").order_by("run_id", "id"):
        latest[report.run_id] = report.diff
    for run_id, diff in latest.items():
        try:
            patch = PatchSet(diff[:2_000_000])
        except UnidiffParseError:
            continue
        out[run_id] = (len(patch), patch.added, patch.removed)
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
            out.append(Outcome(0, False, "A ticked gate could not be read (the page may be "
                                         "out of date): it was skipped. Reload the inbox."))
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
