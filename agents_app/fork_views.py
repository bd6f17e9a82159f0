"""Forks, replays and comparisons in the browser (issue 33): a run's stages with "fork from
here", the fork form, the shortcuts (run again, continue with a higher budget, replay), and
two to six runs compared by stage.

Owner-scoped like every run page: another person's run is a 404, forked or compared alike. A
form sent twice (a double click, a reload) makes one fork: its nonce is kept on the fork.
"""

from __future__ import annotations

import secrets

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from common.web import go

from .fork_forms import BudgetForm, ForkForm
from .forking import checkpoints
from .forking.create import ForkRefused, create_fork
from .forking.diff import compare, side_by_side
from .forking.extras import extras
from .forking.stages import stages
from .models import TERMINAL, Run, Status
from .patterns import get_pattern
from .teams.access import visible
from .trace import stage_label
from .views import owned_run

MAX_COMPARED = 6


def _existing(user, parent: Run, nonce: str) -> Run | None:
    """The fork this very form made already (sent twice), if any."""
    if not nonce:
        return None
    return Run.objects.filter(owner=user, forked_from=parent, fork__nonce=nonce).first()


def stage_rows(run: Run) -> list[dict]:
    """The run's checkpoints as rows to fork from: number, words, gate, and whose it is."""
    rows = []
    for cp in checkpoints.history(run):
        if not cp.stage and not cp.gate:
            continue  # the end: nothing runs from there
        label = (f"Waiting at the {cp.gate.replace('_', ' ')} gate" if cp.gate
                 else stage_label(run.pattern, cp.stage))
        rows.append({"seq": cp.seq, "label": label, "gate": cp.gate, "stage": cp.stage,
                     "inherited": cp.run_id != run.pk, "owner_run": cp.run_id})
    return rows


@login_required
@require_GET
def fork_page(request, pk: int):
    run = owned_run(request, pk)
    if request.GET.get("part") == "stages":  # the run page's "Stages", loaded when opened
        return render(request, "agents_app/fork_page.html#stage-table", {
            "run": run, "rows": stage_rows(run), "nonce": secrets.token_hex(16)})
    return render(request, "agents_app/fork_page.html", {
        "run": run, "rows": stage_rows(run),
        "nonce": secrets.token_hex(16), "budget_form": BudgetForm(),
        "can_continue": run.status in (Status.BUDGET_EXCEEDED, Status.FAILED),
        "replay_refusal": get_pattern(run.pattern).replay_refusal(run.state or {})})


@login_required
@require_http_methods(["GET", "POST"])
def fork_form(request, pk: int, seq: int):
    run = owned_run(request, pk)
    pattern = get_pattern(run.pattern)
    cp = checkpoints.at(run, seq)
    if cp is None:
        raise Http404("This run has no recorded stage of that number.")
    state = checkpoints.state_at(cp)
    edit = pattern.fork_edit(cp.stage, cp.gate, state)
    refusal = pattern.fork_refusal(cp.stage, cp.gate, state)
    data = request.POST if request.method == "POST" else None
    form = ForkForm(data, pattern=pattern, run=run, edit=edit,
                    initial={"nonce": secrets.token_hex(16)})
    ctx = {"run": run, "form": form, "seq": seq, "cp": cp, "refusal": refusal,
           "label": (f"the {cp.gate.replace('_', ' ')} gate" if cp.gate
                     else stage_label(run.pattern, cp.stage)),
           "edit_label": edit.label if edit else ""}
    if request.method == "GET":
        return render(request, "agents_app/fork_form.html", ctx)
    error = ""
    if form.is_valid():
        nonce = form.cleaned_data.get("nonce") or ""
        if done := _existing(request.user, run, nonce):
            return go(request, done)  # sent twice: the fork it made
        retry = request.POST.get("kind") == "retry"  # as it was: no edit, same models
        try:
            edits = None if retry else form.edits()
            fork = create_fork(run, request.user, seq=seq, kind="retry" if retry else "fork",
                               edits=edits, models={} if retry else form.models(),
                               gates={} if retry else form.gates(),
                               max_cost_usd=form.cleaned_data.get("max_cost_usd"),
                               max_tokens=form.cleaned_data.get("max_tokens"),
                               note=form.cleaned_data.get("note") or "")
        except ForkRefused as exc:
            error = str(exc)
        except Exception as exc:  # a ValidationError of the JSON field
            from django.core.exceptions import ValidationError

            if not isinstance(exc, ValidationError):
                raise
            error = " ".join(exc.messages)
        else:
            _remember_nonce(fork, nonce)
            messages.success(request, f"Run {fork.pk} is a fork of run {run.pk}.")
            return go(request, fork)
    return render(request, "agents_app/fork_form.html", {**ctx, "error": error}, status=400)


def _remember_nonce(fork: Run, nonce: str) -> None:
    if nonce:
        Run.objects.filter(pk=fork.pk).update(fork={**(fork.fork or {}), "nonce": nonce[:64]})


@login_required
@require_POST
def fork_shortcut(request, pk: int, kind: str):
    """Run again, replay, or continue with a higher budget: a fork underneath."""
    run = owned_run(request, pk)
    if kind not in ("again", "replay", "continue"):
        raise Http404("No such action.")
    nonce = (request.POST.get("nonce") or "")[:64]
    if done := _existing(request.user, run, nonce):
        return go(request, done)
    budget = BudgetForm(request.POST) if kind == "continue" else None
    if budget is not None and not budget.is_valid():
        return _refused(request, run, " ".join(m for e in budget.errors.values() for m in e))
    try:
        fork = create_fork(
            run, request.user, kind=kind,
            max_cost_usd=budget.cleaned_data.get("max_cost_usd") if budget else None,
            max_tokens=budget.cleaned_data.get("max_tokens") if budget else None)
    except ForkRefused as exc:
        return _refused(request, run, str(exc), exc.status)
    _remember_nonce(fork, nonce)
    words = {"again": "runs the same task again", "replay": "replays it from its journal",
             "continue": "continues it with the new budget"}[kind]
    messages.success(request, f"Run {fork.pk} {words}.")
    return go(request, fork)


def _refused(request, run: Run, message: str, status: int = 400):
    return render(request, "agents_app/fork_page.html", {
        "run": run, "rows": stage_rows(run),
        "nonce": secrets.token_hex(16), "budget_form": BudgetForm(), "error": message,
        "can_continue": run.status in (Status.BUDGET_EXCEEDED, Status.FAILED),
        "replay_refusal": get_pattern(run.pattern).replay_refusal(run.state or {})},
        status=status)


# --- comparing runs ------------------------------------------------------------------------
def _ids(raw: str) -> list[int]:
    ids: list[int] = []
    for part in (raw or "").replace(" ", ",").split(","):
        if not part:
            continue
        if not part.isdigit() or len(part) > 18:
            raise ValueError(f"“{part[:20]}” is not a run number.")
        if int(part) not in ids:
            ids.append(int(part))
    return ids


@login_required
@require_GET
def compare_runs(request):
    raw = ",".join(request.GET.getlist("runs"))  # ?runs=1,2 or the history's ticks
    if "\x00" in raw or len(raw) > 500:
        raise Http404("No such runs.")
    try:
        ids = _ids(raw)
    except ValueError as exc:
        return render(request, "agents_app/compare.html", {"error": str(exc)}, status=400)
    if not ids:  # the page itself: how to choose runs
        return render(request, "agents_app/compare.html", {"empty": True})
    if not 2 <= len(ids) <= MAX_COMPARED:
        return render(request, "agents_app/compare.html", {
            "error": f"Choose two to {MAX_COMPARED} runs to compare (you chose {len(ids)})."},
            status=400)
    found = {r.pk: r for r in visible(Run.objects, request.user).filter(pk__in=ids)}
    if len(found) != len(ids):
        raise Http404("No such runs.")
    runs = [found[i] for i in ids]
    records = [stages(r) for r in runs]
    ctx = {"runs": runs, "pairs": len(runs) == 2,
           "same_pattern": len({r.pattern for r in runs}) == 1,
           "terminal": TERMINAL, "extras": extras(runs)}
    if len(runs) == 2:
        diff = compare(records[0], records[1], (f"run {runs[0].pk}", f"run {runs[1].pk}"))
        ctx.update(diff=diff)
    else:
        columns, first = side_by_side(records)
        ctx.update(columns=columns, first=first,
                   first_name=columns[first].name if first is not None else "")
    return render(request, "agents_app/compare.html", ctx)
