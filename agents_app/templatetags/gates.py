"""The gate box in a run's header: who the open gate is for, its approvals so far and who is
left, its deadline. The same for every watcher (live updates render it once for all)."""

from __future__ import annotations

from django import template

register = template.Library()


@register.simple_tag
def gate_facts(run):
    from ..gates import core
    from ..gates.models import GateOpening

    # Only a team's waiting run has a box (rules, assignment and deadlines are a team's): the
    # header of every other run, drawn on each live update, asks the database nothing here.
    if run is None or not getattr(run, "pk", None) or run.team_id is None \
            or not run.is_waiting:
        return None
    stop = GateOpening.objects.filter(run_id=run.pk).select_related(
        "team", "assignee_user", "assignee_team").order_by("-opened_seq").first()
    if stop is None:
        return None
    facts = {"stop": stop, "open": stop.closed_at is None}
    if facts["open"]:
        t = core.tally(stop)
        policy = stop.policy or {}
        facts.update(tally=t, team=stop.team, assignee=core.assignee_words(stop)
                     if stop.assignee_user_id or stop.assignee_team_id else "",
                     deadline=stop.deadline_at, default=policy.get("default_action", ""),
                     escalate_to=policy.get("escalate_to_name", ""),
                     escalated=stop.escalated_at is not None, rule=policy.get("rule", ""))
    return facts
