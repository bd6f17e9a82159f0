"""A gate shared by a team (issue 35): who it is for, how many approvals it needs, what
happens at its deadline, and the audit of all of it.

- When a run stops at a gate, ``opened`` records the stop (a ``GateOpening``): the team's
  first matching rule (``matching.py``), the approvals it needs, its assignee (the rule's, or
  the owners CODEOWNERS names on the base branch), its deadline; and tells those concerned.
- A person's decision goes through ``person_decides``. A gate needing one approval is
  decided at once, as before. A gate needing k approvals records each person's vote, bound to
  the hash of exactly what the gate shows (``Pattern.decided_on``), and is decided when k
  distinct people approved that same hash (the run's initiator excluded when the rule says
  so) or when enough rejected. An edit at such a gate (a plan's steps) is applied in place:
  the gate moves to a new step of the run (a page loaded before cannot approve what it no
  longer shows), every approval of the old content is voided, and those people are told.
- ``sweep_timers`` (the beat, every 15 s) fires what is due: the reminder, the escalation to
  another team, and the deadline's default decision, recorded as decided by policy. Each is
  claimed by a conditional UPDATE, so a timer fires once however many processes sweep, and
  since the times are rows, they survive restarts of every process.

Every action writes a ``GateAudit`` row: who, when, through which channel, on what hash,
with how many approvals of how many.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from pydantic import ValidationError

from .. import inbox_live
from ..events import append_events
from ..forking import checkpoints
from ..models import Run
from ..patterns import get_pattern
from ..patterns.base import Decision, Event, InvalidDecision, validation_text
from ..patterns.records import PlanProposed
from ..teams.models import DECIDING_ROLES, Membership, Team
from . import matching
from .models import Channel, DefaultAction, GateAudit, GateOpening, GateVote

log = logging.getLogger("quorum.gates")

APPROVING = ("approve", "accept")  # every other action at a gate counts as a rejection


class NotAllowed(InvalidDecision):
    """This person may see the gate but not decide it (a member, not an approver; the run's
    initiator where the rule excludes them). The views answer 403."""

    status = 403


@dataclass
class Tally:
    required: int
    approvals: list[str]  # usernames, on the current content
    rejections: list[str]
    left: list[str]  # approvers who have not voted (usernames), initiator excluded if so
    content_hash: str

    @property
    def approved(self) -> int:
        return len(self.approvals)


# --- opening ------------------------------------------------------------------------------
def content_hash(run: Run) -> str:
    pattern = get_pattern(run.pattern)
    on = pattern.decided_on(run.gate, run.state)
    return checkpoints.digest(run.state if on is None else on)


def _policy(rule) -> dict[str, Any]:
    if rule is None:
        return {}
    return {"rule": rule.name, "required": rule.required_approvals,
            "exclude_initiator": rule.exclude_initiator,
            "rejections": rule.rejections_to_reject,
            "default_action": rule.default_action,
            "escalate_to": rule.escalate_to_id,
            "escalate_to_name": rule.escalate_to.name if rule.escalate_to_id else ""}


def opened(run_id: int) -> GateOpening | None:
    """Record the run's stop at its gate, once (a redelivered task finds it made). Reads the
    rules and CODEOWNERS before any transaction; writes the opening, its audit and its
    notifications in one."""
    run = Run.objects.filter(pk=run_id).select_related("team").first()
    if run is None or not run.is_waiting:
        return None
    existing = GateOpening.objects.filter(run=run, opened_seq=run.stage_seq).first()
    if existing is not None:
        return existing
    facts = matching.facts_for(run)
    rule = matching.rule_for(run.team_id, facts)
    owners = matching.Owners()
    if rule is not None and rule.use_codeowners and facts.repo_path:
        owners = matching.owners_of(matching.read_codeowners(facts.repo_path, facts.base),
                                    facts.paths)
    now = timezone.now()
    opening = GateOpening(run=run, gate=run.gate, opened_seq=run.stage_seq, seq=run.stage_seq,
                          team_id=run.team_id, rule=rule, policy=_policy(rule),
                          required=rule.required_approvals if rule else 1,
                          content_hash=content_hash(run))
    if rule is not None:
        opening.assignee_user = rule.assign_user
        opening.assignee_team = rule.assign_team
        if owners.users and opening.assignee_user is None:
            opening.assignee_user = owners.users[0]
        if owners.teams and opening.assignee_team is None:
            opening.assignee_team = owners.teams[0]
        if rule.deadline_minutes:
            opening.deadline_at = now + timedelta(minutes=rule.deadline_minutes)
            if rule.remind_minutes_before:
                opening.remind_at = opening.deadline_at - timedelta(
                    minutes=rule.remind_minutes_before)
            if rule.escalate_minutes_before is not None and rule.escalate_to_id:
                opening.escalate_at = opening.deadline_at - timedelta(
                    minutes=rule.escalate_minutes_before)
    try:
        with transaction.atomic():
            opening.save()
            detail = f"Rule “{rule.name}”." if rule else (
                "The team's default: one approval." if run.team_id else "")
            if owners.users or owners.teams or owners.unknown:
                named = [u.get_username() for u in owners.users] + [t.name for t in owners.teams]
                detail += f" CODEOWNERS on {facts.base}: {', '.join(named) or 'nobody known'}"
                if owners.unknown:
                    detail += f" (not found here: {', '.join(owners.unknown[:10])})"
                detail += "."
            audit(opening, "opened", detail=detail.strip())
            if opening.assignee_user_id or opening.assignee_team_id:
                audit(opening, "assigned", detail=f"To {assignee_words(opening)}, by the rule.")
            inbox_live.changed(run.pk)
            if run.team_id is not None:
                # Told to the others who decide it; the owner of a personal run started it
                # and is told by its page and inbox, not by a message per gate.
                _notify("opened", opening, deciders(opening), teams=_teams_of(opening))
                # On the timeline, and a live update of the page's header (its gate box):
                # this stop is recorded just after the commit that made the run wait.
                append_events(run.pk, [Event("gate_ready", _ready_words(opening, run), {
                    "gate": run.gate, "required": opening.required})])
    except IntegrityError:  # another process recorded this stop meanwhile
        return GateOpening.objects.filter(run=run, opened_seq=run.stage_seq).first()
    return opening


def rule_at(run: Run, gate: str):
    """The team's rule for ``gate`` of the run, as it would apply now (None: none)."""
    if run.team_id is None:
        return None
    facts = matching.facts_for(run)
    facts.gate = gate
    return matching.rule_for(run.team_id, facts)


def _ready_words(opening: GateOpening, run: Run) -> str:
    words = (f"For the approvers of team {run.team.name}" if run.team_id else "For its owner")
    if opening.required > 1:
        words += f": {opening.required} approvals needed"
    if opening.assignee_user_id or opening.assignee_team_id:
        words += f"; assigned to {assignee_words(opening)}"
    if opening.deadline_at:
        words += f"; deadline {opening.deadline_at:%Y-%m-%d %H:%M} UTC"
    return words + "."


def current(run: Run) -> GateOpening | None:
    """The open stop of a waiting run (recorded now if the worker that stopped it did not
    get to it: a crash between its commit and this)."""
    if not run.is_waiting:
        return None
    found = GateOpening.objects.filter(run=run, closed_at__isnull=True).order_by(
        "-opened_seq").first()
    return found if found is not None else opened(run.pk)


def assignee_words(opening: GateOpening) -> str:
    parts = []
    if opening.assignee_user_id:
        parts.append(opening.assignee_user.get_username())
    if opening.assignee_team_id:
        parts.append(f"team {opening.assignee_team.name}")
    return " and ".join(parts) or "nobody in particular"


# --- who decides ---------------------------------------------------------------------------
def _deciding_teams(opening: GateOpening) -> list[int]:
    team_id = opening.run.team_id  # the run's team now (the stop keeps the one it opened with)
    teams = [team_id] if team_id else []
    if opening.escalated_at and opening.policy.get("escalate_to"):
        teams.append(opening.policy["escalate_to"])
    if opening.assignee_team_id:
        teams.append(opening.assignee_team_id)
    return teams


def deciders(opening: GateOpening) -> list:
    """The people who may decide the gate now: the owner of a personal run; the approvers of
    its team, of the team it was assigned or escalated to, and the person it was assigned to
    while they are a member."""
    run = opening.run
    if run.team_id is None:
        return [run.owner]
    from django.contrib.auth import get_user_model

    users = get_user_model().objects.filter(
        memberships__team_id__in=_deciding_teams(opening),
        memberships__role__in=DECIDING_ROLES)
    if opening.assignee_user_id:
        users = users | get_user_model().objects.filter(
            pk=opening.assignee_user_id, memberships__team_id=run.team_id)
    return list(users.distinct().order_by("username"))


def may_decide(user, opening: GateOpening) -> bool:
    run = opening.run
    if run.team_id is None:
        return run.owner_id == user.pk
    if opening.assignee_user_id == user.pk and Membership.objects.filter(
            user_id=user.pk, team_id=run.team_id).exists():
        return True
    return Membership.objects.filter(user_id=user.pk, team_id__in=_deciding_teams(opening),
                                     role__in=DECIDING_ROLES).exists()


def _teams_of(opening: GateOpening) -> list[Team]:
    return list(Team.objects.filter(pk__in=_deciding_teams(opening)))


def tally(opening: GateOpening) -> Tally:
    live = list(opening.votes.filter(voided_at__isnull=True).select_related("user"))
    approvals = [v.user.get_username() for v in live
                 if v.action in APPROVING and v.content_hash == opening.content_hash]
    rejections = [v.user.get_username() for v in live if v.action not in APPROVING]
    voted = {v.user_id for v in live}
    left = [u.get_username() for u in deciders(opening) if u.pk not in voted
            and not (opening.policy.get("exclude_initiator") and u.pk == opening.run.owner_id)]
    return Tally(opening.required, approvals, rejections, left, opening.content_hash)


def tallies(openings) -> dict[int, Tally]:
    """``tally`` of each stop (by its id), in a few statements whatever their number: the
    inbox's cards. Each is what ``tally`` returns for it."""
    openings = list(openings)
    if not openings:
        return {}
    from django.contrib.auth import get_user_model

    users = get_user_model().objects
    live: dict[int, list[GateVote]] = {}
    for vote in GateVote.objects.filter(opening__in=openings, voided_at__isnull=True
                                        ).select_related("user"):
        live.setdefault(vote.opening_id, []).append(vote)
    teams = {t for op in openings if op.run.team_id for t in _deciding_teams(op)}
    by_team: dict[int, dict[int, Any]] = {}
    for m in Membership.objects.filter(team_id__in=teams, role__in=DECIDING_ROLES
                                       ).select_related("user"):
        by_team.setdefault(m.team_id, {})[m.user_id] = m.user
    assigned = {(m.user_id, m.team_id): m.user for m in Membership.objects.filter(
        user_id__in={op.assignee_user_id for op in openings
                     if op.run.team_id and op.assignee_user_id},
        team_id__in={op.run.team_id for op in openings if op.run.team_id}
    ).select_related("user")}
    owners = users.in_bulk({op.run.owner_id for op in openings if not op.run.team_id})
    out = {}
    for op in openings:
        run = op.run
        if run.team_id is None:
            people = [owners[run.owner_id]] if run.owner_id in owners else []
        else:
            found: dict[int, Any] = {}
            for team in _deciding_teams(op):
                found.update(by_team.get(team, {}))
            person = assigned.get((op.assignee_user_id, run.team_id))
            if person is not None:
                found[person.pk] = person
            people = sorted(found.values(), key=lambda u: u.get_username())
        votes = live.get(op.pk, [])
        voted = {v.user_id for v in votes}
        out[op.pk] = Tally(
            op.required,
            [v.user.get_username() for v in votes
             if v.action in APPROVING and v.content_hash == op.content_hash],
            [v.user.get_username() for v in votes if v.action not in APPROVING],
            [u.get_username() for u in people if u.pk not in voted and not (
                op.policy.get("exclude_initiator") and u.pk == run.owner_id)],
            op.content_hash)
    return out


# --- deciding ------------------------------------------------------------------------------
def person_decides(run: Run, user, expected_seq: int, decision: Decision, *, enqueue: bool,
                   channel: str) -> Run:
    """A person's decision at the run's gate: applied at once at a gate that needs one
    approval; at one that needs more, recorded as a vote and applied when the votes are in.
    Raises StaleDecision, InvalidDecision or NotAllowed. The run returned has
    ``vote_note`` set when the decision was recorded and the gate still waits."""
    from ..engine.actions import StaleDecision, apply_decision

    opening = current(run)
    if opening is None:  # not waiting: the engine says so in its own words
        return apply_decision(run, user, expected_seq, decision, enqueue=enqueue)
    if not may_decide(user, opening):
        raise NotAllowed("Only the approvers of this run's team decide its gates"
                         + (f" (or {assignee_words(opening)}, it is assigned to)"
                            if opening.assignee_user_id else "") + ".")
    approving = decision.action in APPROVING
    policy = opening.policy or {}
    if approving and policy.get("exclude_initiator") and user.pk == run.owner_id:
        raise NotAllowed("You started this run, and this gate's rule (“"
                         f"{policy.get('rule', '')}”) asks for the approval of others.")
    needs_votes = opening.required > 1 or int(policy.get("rejections", 1)) > 1
    author = decision.author or user.get_username()
    if not needs_votes:
        return apply_decision(run, user, expected_seq, decision, enqueue=enqueue,
                              channel=channel)
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if not locked.is_waiting or locked.stage_seq != expected_seq:
            raise StaleDecision("This run is no longer waiting for that decision: it was "
                                "decided already, cancelled, or the page is out of date.")
        op = GateOpening.objects.select_for_update().get(pk=opening.pk)
        if approving and decision.edits is not None:
            decision = _edit_in_place(locked, op, user, decision, channel)
        previous = op.votes.filter(user=user, voided_at__isnull=True)
        previous.update(voided_at=timezone.now(), void_reason="replaced by a later vote")
        GateVote.objects.create(opening=op, user=user, action=decision.action,
                                content_hash=op.content_hash, channel=channel,
                                feedback=decision.feedback[:10_000])
        t = tally(op)
        rejections_needed = int(policy.get("rejections", 1))
        enough = (t.approved >= op.required) if approving else (
            len(t.rejections) >= rejections_needed)
        what = "approved" if approving else "rejected"
        audit(op, what, actor=user, channel=channel, approvals=t.approved,
              detail=(decision.feedback[:500] if not approving else ""))
        if not enough:
            needed = (op.required - t.approved) if approving else (
                rejections_needed - len(t.rejections))
            note = (f"{author} {what} ({t.approved} of {op.required} approvals"
                    + (f"; {len(t.rejections)} of {rejections_needed} rejections"
                       if not approving or t.rejections else "") + f"): {needed} more needed.")
            append_events(locked.pk, [Event("gate_vote", note, {
                "gate": locked.gate, "approvals": t.approved, "required": op.required})])
            locked.vote_note = note
            inbox_live.changed(locked.pk)
            return locked
        if approving and decision.edits is not None and _has_fork_edit(locked):
            decision = replace(decision, edits=None)  # applied in place already
        done = apply_decision(locked, user, expected_seq if locked.stage_seq == expected_seq
                              else locked.stage_seq, decision, enqueue=enqueue,
                              channel=channel)
    return done


def _has_fork_edit(run: Run) -> bool:
    return get_pattern(run.pattern).fork_edit(run.stage, run.gate, run.state) is not None


def _edit_in_place(locked: Run, op: GateOpening, user, decision: Decision,
                   channel: str) -> Decision:
    """Apply an approval's edit at a gate that needs several: the new content is a new step
    of the run, every approval of the old content is voided and its people are told. Gates
    whose pattern offers no edit of its content (a merge's message and method are how to
    merge, not what) keep the decision's fields for when it is applied."""
    from ..records import persist

    pattern = get_pattern(locked.pattern)
    fe = pattern.fork_edit(locked.stage, locked.gate, locked.state)
    if fe is None:
        return decision
    edits = decision.edits
    value = edits if isinstance(edits, dict) else {"steps": edits}
    try:
        model = fe.schema.model_validate(value)
    except ValidationError as exc:
        raise InvalidDecision(validation_text(exc)) from exc
    author = decision.author or user.get_username()
    state, records = fe.apply(locked.state, model, author)
    if state is locked.state or state == locked.state:
        return replace(decision, edits=None)
    records = [replace(r, reason="Edited at the gate; the approvals before it are void")
               if isinstance(r, PlanProposed) else r for r in records]
    persist(locked, records, user=user)
    locked.state = state
    locked.stage_seq += 1
    locked.save(update_fields=["state", "stage_seq", "updated_at"])
    new_hash = content_hash(locked)
    voided = list(op.votes.filter(voided_at__isnull=True, action__in=APPROVING)
                  .exclude(user=user).select_related("user"))
    op.votes.filter(voided_at__isnull=True).update(
        voided_at=timezone.now(), void_reason=f"edited by {author}")
    op.seq, op.content_hash = locked.stage_seq, new_hash
    op.save(update_fields=["seq", "content_hash"])
    names = ", ".join(v.user.get_username() for v in voided)
    audit(op, "edited", actor=user, channel=channel,
          detail=f"Approvals reset{': ' + names + ' must approve again' if names else ''}.")
    locked.last_event_seq = append_events(locked.pk, [Event(
        "gate_edited", f"{author} edited what is to be decided; the approvals given before "
        f"are void ({0} of {op.required}).", {"gate": locked.gate})]) or locked.last_event_seq
    checkpoints.write(locked.pk, locked.stage_seq, stage=locked.stage, gate=locked.gate,
                      state=locked.state, event_seq=locked.last_event_seq)
    if voided:
        _notify("reset", op, [v.user for v in voided], serial=str(op.seq),
                detail=f"{author} edited it after you approved; approve again if you agree.")
    return replace(decision, edits=None)


def closed(run_id: int, *, outcome: str, actor=None, channel: str = "", how: str = "person",
           detail: str = "") -> None:
    """The run left its gate (decided, cancelled, ended): close its open stop, in the
    caller's transaction."""
    op = GateOpening.objects.filter(run_id=run_id, closed_at__isnull=True).order_by(
        "-opened_seq").first()
    if op is None:
        return
    if not GateOpening.objects.filter(pk=op.pk, closed_at__isnull=True).update(
            closed_at=timezone.now(), outcome=outcome[:20]):
        return
    inbox_live.changed(run_id)  # the card leaves every open inbox
    t = tally(op) if op.required > 1 else None
    what = {"person": "decided", "timer": "defaulted", "deadline": "defaulted",
            "ended": "ended"}.get(how, "policy")
    audit(op, what, actor=actor, channel=channel, approvals=t.approved if t else 0,
          detail=(detail or outcome)[:500])
    if how == "person" and op.team_id:  # a deadline's default tells them itself (_default)
        who = actor.get_username() if actor is not None else "Someone"
        _notify("decided", op, [u for u in deciders(op) if actor is None or u.pk != actor.pk],
                teams=_teams_of(op), detail=f"{who} decided it: {outcome}.")


# --- assignment ----------------------------------------------------------------------------
def assign(opening: GateOpening, actor, *, user=None, team: Team | None = None,
           delegate: bool = False) -> str:
    """Reassign the gate (or delegate it: the assignee handing it on), recorded and told."""
    with transaction.atomic():
        op = GateOpening.objects.select_for_update().get(pk=opening.pk)
        if op.closed_at is not None:
            return "This gate was decided meanwhile; nothing was changed."
        before = assignee_words(op)
        op.assignee_user, op.assignee_team = user, team
        op.save(update_fields=["assignee_user", "assignee_team"])
        verb = "delegated" if delegate else "reassigned"
        audit(op, verb, actor=actor, channel=Channel.PAGE,
              detail=f"From {before} to {assignee_words(op)}.")
        targets = [user] if user is not None else []
        if team is not None:
            targets += [m.user for m in team.memberships.filter(
                role__in=DECIDING_ROLES).select_related("user")]
        inbox_live.changed(op.run_id)
        _notify("assigned", op, targets, teams=[team] if team else [],
                serial=f"{verb}-{op.pk}-{timezone.now().timestamp():.0f}",
                detail=f"{actor.get_username()} {verb} it to {assignee_words(op)}.")
    return f"Gate {verb} to {assignee_words(op)}."


# --- timers --------------------------------------------------------------------------------
def sweep_timers(now=None) -> dict[str, int]:
    """Fire the reminders, escalations and deadlines that are due. Each is claimed by a
    conditional UPDATE (the ``*_at`` column still empty) in the same transaction that carries
    it out, so it fires once however many processes sweep, and a process killed in between
    leaves it unclaimed for the next sweep. One that fails is kept claimed and its audit
    says why, rather than failing again every sweep."""
    now = now or timezone.now()
    fired = {"reminded": 0, "escalated": 0, "defaulted": 0, "opened": _open_missing()}
    for key, column, due, fire in (("reminded", "reminded_at", "remind_at", _remind),
                                   ("escalated", "escalated_at", "escalate_at", _escalate),
                                   ("defaulted", "defaulted_at", "deadline_at", _default)):
        for op in GateOpening.objects.filter(**{"closed_at__isnull": True,
                                                f"{column}__isnull": True,
                                                f"{due}__lte": now})[:500]:
            fired[key] += _fire(op, column, now, fire)
    return fired


def _fire(op: GateOpening, column: str, now, fire) -> int:
    with transaction.atomic():
        if not GateOpening.objects.filter(pk=op.pk, **{f"{column}__isnull": True}).update(
                **{column: now}):
            return 0  # another sweep has it
        setattr(op, column, now)
        try:
            with transaction.atomic():
                return fire(op)
        except Exception as exc:  # noqa: BLE001 - kept claimed, said in the audit
            log.exception("gate stop %s: its %s failed", op.pk, column)
            audit(op, "timer_failed", channel=Channel.TIMER,
                  detail=f"{column.removesuffix('_at')} failed: {type(exc).__name__}: {exc}"[:500])
            return 0


def _still_waiting(op: GateOpening) -> Run | None:
    run = Run.objects.filter(pk=op.run_id).first()
    if run is None or not run.is_waiting or run.gate != op.gate or run.stage_seq != op.seq:
        with transaction.atomic():
            closed(op.run_id, outcome="moved on", how="policy",
                   detail="The run had left the gate.")
        return None
    return run


def _remind(op: GateOpening) -> int:
    if _still_waiting(op) is None:
        return 0
    with transaction.atomic():
        audit(op, "reminded", channel=Channel.TIMER,
              detail=f"Deadline at {op.deadline_at:%Y-%m-%d %H:%M} UTC.")
        _notify("reminder", op, deciders(op), teams=_teams_of(op),
                detail="Its deadline is near.")
    return 1


def _escalate(op: GateOpening) -> int:
    if _still_waiting(op) is None:
        return 0
    op.escalated_at = op.escalated_at or timezone.now()
    team = Team.objects.filter(pk=op.policy.get("escalate_to")).first()
    with transaction.atomic():
        if team is not None:  # its approvers see the run and decide it from now on
            GateOpening.objects.filter(pk=op.pk).update(assignee_team=team)
            op.assignee_team = team
            inbox_live.changed(op.run_id)
        audit(op, "escalated", channel=Channel.TIMER,
              detail=f"To team {team.name}: its approvers may decide now." if team
              else "The team to escalate to is gone; nobody was added.")
        if team is not None:
            members = [m.user for m in team.memberships.filter(
                role__in=DECIDING_ROLES).select_related("user")]
            _notify("escalated", op, members, teams=[team],
                    detail=f"Nobody decided it in time; it is escalated to {team.name}.")
    return 1


def _default(op: GateOpening) -> int:
    """The deadline's decision: approve, reject or cancel, recorded as decided by policy.
    A default the gate cannot take (a question needs an answer) cancels the run instead, and
    the audit says why."""
    from ..engine.actions import StaleDecision, apply_decision

    run = _still_waiting(op)
    if run is None:
        return 0
    action = op.policy.get("default_action") or ""
    rule = op.policy.get("rule", "")
    note = f"Nobody decided by the deadline of rule “{rule}”."
    if action not in (DefaultAction.APPROVE, DefaultAction.REJECT, DefaultAction.CANCEL):
        return 0
    from django.contrib.auth import get_user_model

    actor = get_user_model().objects.filter(pk=run.owner_id).first()
    if action == DefaultAction.CANCEL:
        _cancel_by_policy(run, op, actor, note)
        return 1
    decision = Decision(action=action, feedback=f"{note} Rejected by that rule's default."
                        if action == DefaultAction.REJECT else "", author="deadline policy")
    try:
        with transaction.atomic():
            apply_decision(run, actor, op.seq, decision, how="deadline", channel=Channel.TIMER,
                           closing_detail=f"{note} Default: {action}.")
            _notify("decided", op, deciders(op), teams=_teams_of(op),
                    detail=f"{note} The default, {action}, was applied.")
    except StaleDecision:
        return 0
    except InvalidDecision as exc:
        _cancel_by_policy(run, op, actor, f"{note} Its default ({action}) cannot apply at "
                                          f"this gate ({exc}), so the run was cancelled.")
    return 1


def _cancel_by_policy(run: Run, op: GateOpening, actor, note: str) -> None:
    from ..engine.actions import cancel

    with transaction.atomic():
        closed(run.pk, outcome="cancelled", channel=Channel.TIMER, how="timer", detail=note)
        _notify("decided", op, deciders(op), teams=_teams_of(op), detail=note)
        cancel(run, actor, reason=note)


def _open_missing() -> int:
    """Record the stops a crash left unrecorded (a run at a gate with no open stop)."""
    from ..inbox import waiting_statuses

    runs = Run.objects.filter(status__in=waiting_statuses()).exclude(
        pk__in=GateOpening.objects.filter(closed_at__isnull=True).values("run_id")
    ).values_list("pk", flat=True)[:200]
    return sum(1 for pk in runs if opened(pk) is not None)


# --- audit and notifications ----------------------------------------------------------------
def audit(op: GateOpening, what: str, *, actor=None, channel: str = "", approvals: int = 0,
          detail: str = "") -> GateAudit:
    return GateAudit.objects.create(
        opening=op, run_id=op.run_id, actor=actor,
        actor_name=actor.get_username() if actor is not None else "",
        channel=channel, what=what, content_hash=op.content_hash, approvals=approvals,
        required=op.required, detail=detail[:2000])


def _notify(kind: str, op: GateOpening, users, *, teams=(), detail: str = "",
            serial: str = "") -> None:
    from ..notify import outbox

    announce = getattr(outbox, "announce", None)
    if announce is None:
        return
    announce(kind, op, [u for u in users if u is not None], teams=[t for t in teams if t],
             detail=detail, serial=serial or str(op.seq))


def open_gates_for(user) -> Q:
    """Open stops the person may decide, as a filter on GateOpening (for the inbox)."""
    teams = Membership.objects.filter(user_id=user.pk, role__in=DECIDING_ROLES).values(
        "team_id")
    return (Q(run__team__isnull=True, run__owner=user) | Q(team_id__in=teams)
            | Q(assignee_team_id__in=teams) | Q(assignee_user=user))
