"""A run's gates on its page: every stop with its audit (exportable as CSV or JSON), and the
open stop's assignment, which the people who may decide it can hand on."""

from __future__ import annotations

import csv
import json

from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from ..csvcells import cell
from ..teams.access import user_teams
from ..teams.models import Membership, Role, Team
from ..views import owned_run
from . import core
from .models import GateAudit, GateOpening

PANEL = "agents_app/gates/panel.html"
COLUMNS = ("run", "gate", "stop", "at", "what", "who", "channel", "content_hash", "approvals",
           "required", "detail")


def _context(request, run, **extra) -> dict:
    stops = list(GateOpening.objects.filter(run=run).select_related(
        "assignee_user", "assignee_team", "team").prefetch_related("audit"))
    open_stop = next((s for s in reversed(stops) if s.closed_at is None), None)
    if open_stop is not None and not run.is_waiting:
        open_stop = None
    ctx = {"run": run, "stops": stops, "open_stop": open_stop, **extra}
    if open_stop is not None:
        ctx["tally"] = core.tally(open_stop)
        if core.may_decide(request.user, open_stop) or _admin(request.user, run):
            ctx["choices"] = _choices(run, request.user)
    return ctx


def _admin(user, run) -> bool:
    return run.team_id is not None and Membership.objects.filter(
        user_id=user.pk, team_id=run.team_id, role=Role.ADMIN).exists()


def _choices(run, user) -> list[tuple[str, str]]:
    """Whom a gate may be handed to: a member of the run's team, or one of the teams the
    person handing it on belongs to (no other team's name is shown to them)."""
    if run.team_id is None:
        return []
    people = [(f"u:{m.user_id}", f"{m.user.get_username()} ({m.get_role_display().split(':')[0]})")
              for m in Membership.objects.filter(team_id=run.team_id).select_related("user")
              .order_by("user__username")]
    teams = [(f"t:{t.pk}", f"Team {t.name}") for t in user_teams(user)[:200]]
    return people + teams


@login_required
@require_GET
def gate_panel(request, pk: int):
    run = owned_run(request, pk)
    ctx = _context(request, run)
    if request.htmx:
        return render(request, f"{PANEL}#gates", ctx)
    return render(request, PANEL, ctx)


@login_required
@require_POST
def gate_assign(request, pk: int):
    run = owned_run(request, pk)
    opening = core.current(run)
    stop = (request.POST.get("stop") or "")[:20]
    if not stop.isdigit():
        return _answer(request, run, 400, "The gate this form was for could not be read; "
                                          "reload the page. Nothing was changed.")
    if opening is None or int(stop) != opening.pk:
        return _answer(request, run, 409, "This gate was decided or moved on before the "
                                          "change was sent; nothing was changed.")
    if not (core.may_decide(request.user, opening) or _admin(request.user, run)):
        raise PermissionDenied("Only the people who may decide this gate, or the team's "
                               "admins, may hand it on.")
    target = (request.POST.get("to") or "").strip()[:40]
    if target not in {value for value, _ in _choices(run, request.user)}:
        return _answer(request, run, 400, "Choose a member of the run's team, or a team.")
    kind, _, ident = target.partition(":")
    user = team = None
    if kind == "u":
        user = get_user_model().objects.get(pk=int(ident))
    else:
        team = Team.objects.get(pk=int(ident))
    delegate = opening.assignee_user_id == request.user.pk
    message = core.assign(opening, request.user, user=user, team=team, delegate=delegate)
    return _answer(request, run, 200, message)


def _answer(request, run, status: int, message: str):
    ctx = _context(request, run, message=message, failed=status != 200)
    template = f"{PANEL}#gates" if request.htmx else PANEL
    return render(request, template, ctx, status=status)


def audit_rows(run) -> list[dict]:
    rows = []
    for a in GateAudit.objects.filter(run=run).select_related("opening").order_by("id"):
        rows.append({"run": run.pk, "gate": a.opening.gate, "stop": a.opening.opened_seq,
                     "at": a.at.isoformat(), "what": a.what, "who": a.actor_name or "Quorum",
                     "channel": a.channel, "content_hash": a.content_hash,
                     "approvals": a.approvals, "required": a.required, "detail": a.detail})
    return rows


@login_required
@require_GET
def gate_audit_export(request, pk: int, fmt: str):
    run = owned_run(request, pk)
    rows = audit_rows(run)
    name = f"quorum-run-{run.pk}-gate-audit.{fmt}"
    if fmt == "json":
        response = HttpResponse(json.dumps({"run": run.pk, "audit": rows}, indent=2),
                                content_type="application/json")
    else:
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        writer = csv.writer(response)
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow([cell(row[c]) for c in COLUMNS])
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


