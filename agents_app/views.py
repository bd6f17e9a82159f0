"""Pages: the dashboard (start form + history) and the run page (live timeline, plan gate,
steps, answer, model-call trace). One view per page; htmx requests get the named partial."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.db.models import Q
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from . import engine
from .forms import (
    HistoryFilterForm,
    PlanDecisionForm,
    StartRunForm,
    ToolDecisionForm,
    read_errors,
)
from .models import ModelCall, Run
from .patterns import PATTERNS
from .patterns.base import Decision, InvalidDecision
from .patterns.gate_input import without_control_characters
from .patterns.plan_execute import EMPTY_PLAN
from .patterns.react import APPROVAL_GATE, ASK_GATE
from .rendering import step_diff
from .trace import call_io

PAGE_SIZE = 25


# --- dashboard -------------------------------------------------------------------------------
def keyset_page(rows, form, params: dict, name: str) -> dict:
    """One page of a history list, newest first. Keyset pagination ("older than id N", from
    the form's ``before``) stays fast at any depth, unlike OFFSET and COUNT."""
    before = form.cleaned_data.get("before") if form.is_valid() else None
    if before:
        rows = rows.filter(id__lt=before)
    page = list(rows.order_by("-id")[: PAGE_SIZE + 1])
    has_more = len(page) > PAGE_SIZE
    page = page[:PAGE_SIZE]
    return {name: page, "filter_form": form, "filter_params": params,
            "next_before": page[-1].pk if has_more else None, "is_first_page": not before}


# The history's search (``q``): how many runs of the other filters it reads directly per step,
# and how long one request searches before it answers with what it found so far.
SEARCH_WINDOW = 2000
SEARCH_SECONDS = 0.06
SEARCH_INDEX = ("agents_app_run_search", "agents_app_run_search_ai", "agents_app_run_search_ad",
                "agents_app_run_search_au")


def _search_index_ready() -> bool:
    """The trigram index of tasks and answers (migration 0006, SQLite) and the triggers that keep
    it current exist (a table rebuild by a later migration drops the triggers)."""
    if connection.vendor != "sqlite":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sqlite_master WHERE name IN (%s, %s, %s, %s)",
                       SEARCH_INDEX)
        return cursor.fetchone()[0] == len(SEARCH_INDEX)


def _search_candidates(q: str, below: int, limit: int) -> list[int]:
    """Ids under ``below``, newest first, of runs whose task or answer holds every trigram of
    ``q``: a superset of the runs containing ``q``."""
    trigrams = dict.fromkeys(q[i:i + 3] for i in range(len(q) - 2))
    match = " AND ".join('"{}"'.format(t.replace('"', '""')) for t in trigrams)
    with connection.cursor() as cursor:
        cursor.execute("SELECT rowid FROM agents_app_run_search WHERE agents_app_run_search "
                       "MATCH %s AND rowid < %s ORDER BY rowid DESC LIMIT %s", [match, below, limit])
        return [row[0] for row in cursor.fetchall()]


def _search_runs(runs, q: str, before: int | None):
    """``runs`` whose task or answer contains ``q`` (``icontains``), as many as one history page
    needs, and where the search stopped (``None`` when it did not: the page is full or no
    older run matches).

    A plain ``icontains`` reads runs until a page is full, so a term that matches few runs reads
    every run (over half a second at 100,000 runs). Here the newest runs are read directly, a
    window at a time (a common term fills the page there); older ones, where the trigram index
    exists, only when it lists them as candidates (every candidate is checked with the same
    ``icontains``, so results do not change). After SEARCH_SECONDS the request stops and the
    page's "Older" link continues from the last run examined: no run is skipped or shown twice,
    and no request reads the whole history. (Where few runs are left to read after the first
    window, as with a narrow status filter, they are read directly instead of through the
    index.)"""
    text = Q(task__icontains=q) | Q(answer__icontains=q)
    indexed = len(q) >= 3 and _search_index_ready()  # the index knows trigrams, nothing shorter
    deadline = time.monotonic() + SEARCH_SECONDS
    found: list[int] = []
    cursor_id = before
    while True:
        scoped = runs.filter(id__lt=cursor_id) if cursor_id else runs
        edge = list(scoped.order_by("-id").values_list("id", flat=True)
                    [SEARCH_WINDOW - 1:SEARCH_WINDOW])
        window = scoped.filter(id__gte=edge[0]) if edge else scoped
        found += window.filter(text).order_by("-id").values_list(
            "id", flat=True)[:PAGE_SIZE + 1 - len(found)]
        if len(found) > PAGE_SIZE or not edge:  # a full page, or every run has been read
            return runs.filter(id__in=found), None
        cursor_id = edge[0]
        if time.monotonic() >= deadline:
            return runs.filter(id__in=found), cursor_id
        if indexed:
            # Few runs left (e.g. a narrow status filter): reading them beats the index, whose
            # candidates come from every run of every user.
            rest = runs.filter(id__lt=cursor_id).values("id")[:SEARCH_WINDOW * 4 + 1].count()
            if rest > SEARCH_WINDOW * 4:
                break
            indexed = False
    size = 64
    while True:
        candidates = _search_candidates(q, cursor_id, size)
        if candidates:
            found += runs.filter(text, id__in=candidates).order_by("-id").values_list(
                "id", flat=True)[:PAGE_SIZE + 1 - len(found)]
        if len(found) > PAGE_SIZE or len(candidates) < size:  # full, or no candidate left
            return runs.filter(id__in=found), None
        cursor_id, size = candidates[-1], min(size * 4, 1024)
        if time.monotonic() >= deadline:
            return runs.filter(id__in=found), cursor_id


def _history(request) -> dict:
    form = HistoryFilterForm(request.GET or None)
    runs = Run.objects.filter(owner=request.user).only(
        "id", "pattern", "task", "status", "models_used", "offline", "cost_usd", "created_at",
        "finished_at", "prompt_tokens", "completion_tokens", "merge_request__status"
    ).select_related("merge_request")
    params, stopped_at = {}, None
    if form.is_valid():
        d = form.cleaned_data
        if d.get("status"):
            runs = runs.filter(status=d["status"])
            params["status"] = d["status"]
        if d.get("pattern"):
            runs = runs.filter(pattern=d["pattern"])
            params["pattern"] = d["pattern"]
        if d.get("q"):
            runs, stopped_at = _search_runs(runs, d["q"], d.get("before"))
            params["q"] = d["q"]
    page = keyset_page(runs, form, params, "runs")
    if stopped_at:  # the search paused: "Older" continues below the last run it examined
        page.update(next_before=stopped_at, search_stopped_at=stopped_at)
    return {**page, "patterns": PATTERNS}


@login_required
@require_GET
def dashboard(request):
    ctx = {"form": StartRunForm(), **_history(request)}
    if request.htmx and request.htmx.target == "history":
        return render(request, "agents_app/dashboard.html#history", ctx)
    return render(request, "agents_app/dashboard.html", ctx)


@login_required
@require_http_methods(["GET", "POST"])
def start_run(request):
    if request.method == "GET":  # the form on a page of its own (a bookmark, a reload)
        return render(request, "agents_app/run_new.html", {"form": StartRunForm()})
    form = StartRunForm(request.POST)
    if not form.is_valid():
        ctx = {"form": form, **_history(request)}
        if request.htmx:
            return render(request, "agents_app/dashboard.html#start-form", ctx, status=400)
        return render(request, "agents_app/dashboard.html", ctx, status=400)
    max_cost, max_tokens = form.budget()
    run = engine.create_run(request.user, form.cleaned_data["pattern"],
                            form.cleaned_data["task"], options=form.options(),
                            models=form.models(), max_cost_usd=max_cost, max_tokens=max_tokens)
    if request.htmx:
        return HttpResponseClientRedirect(run.get_absolute_url())
    return redirect(run)


# --- run page --------------------------------------------------------------------------------
def owned_run(request, pk: int) -> Run:
    return get_object_or_404(Run, pk=pk, owner=request.user)


def _pattern_items(run: Run) -> dict:
    """What the reflective and debate pages show, from the run's items."""
    items = list(run.items.all())
    if run.pattern == "reflective":
        drafts = {i.key: i.data for i in items if i.kind == "draft"}
        critiques = {i.key: i.data for i in items if i.kind == "critique"}
        rounds, previous = [], None
        for key in sorted(drafts, key=int):
            text = drafts[key]["text"]
            changes = None
            if previous is not None:
                changes = [(op, line) for op, line in step_diff(previous.splitlines(),
                                                                 text.splitlines())
                           if op != "same" and line.strip()]
            rounds.append({"n": int(key), "draft": text, "critique": critiques.get(key),
                           "changes": changes})
            previous = text
        return {"reflection_rounds": rounds}
    if run.pattern == "debate":
        by_round: dict[int, list] = {}
        for i in items:
            if i.kind == "argument":
                by_round.setdefault(i.data["round"], []).append(i.data)
        conclusion = next((i.data for i in items if i.kind == "conclusion"), None)
        return {"debate_rounds": sorted(by_round.items()), "conclusion": conclusion,
                "positions": (run.options or {}).get("positions", [])}
    if run.pattern == "team_lead":
        return {"subtasks": (run.state or {}).get("subtasks", []),
                "team": (run.options or {}).get("team", [])}
    if run.pattern == "react":
        steps = sorted((i.data for i in items if i.kind == "step"), key=lambda d: d["iteration"])
        forced = next((i.data for i in items if i.kind == "final"), None)
        pending = (run.state or {}).get("pending") if run.is_waiting else None
        return {"react_steps": steps, "react_forced": forced, "pending": pending,
                "pending_args": json.dumps((pending or {}).get("input", {}), indent=2)}
    if run.pattern == "rewoo":
        answers = [i.data for i in items if i.kind == "answer"]
        return {"sketches": [i.data for i in items if i.kind == "sketch"],
                "evidence": [i.data for i in items if i.kind == "evidence"],
                "answers": answers, "final_answer": answers[-1] if answers else None,
                "verifications": [i.data for i in items if i.kind == "verification"]}
    return {}


def run_context(run: Run, **extra) -> dict:
    plans = list(run.plan_versions.all())
    plan = plans[-1] if plans else None
    diff = step_diff(plans[-2].steps, plan.steps) if len(plans) > 1 else []
    state_plan = run.state.get("plan") or {}
    done = len(run.state.get("results") or [])
    total = len(state_plan.get("steps") or [])
    return {
        "run": run,
        "plans": plans,
        "plan": plan,
        "plan_diff": diff,
        "diff_changed": any(op != "same" for op, _ in diff),
        "steps": list(run.step_results.all()),
        "calls": list(run.model_calls.all()),
        "approvals": list(run.approvals.select_related("user")),
        "events": (events := list(run.events.all())),
        "last_seq": events[-1].seq if events else 0,
        "progress_done": done,
        "progress_total": total,
        "progress_pct": int(100 * done / total) if total else (100 if run.status == "completed" else 0),
        "at_plan_gate": run.status == "awaiting_plan_approval",
        # The plan editor shows the steps as last posted (even none), else the plan's own.
        "gate_steps": plan.steps if plan and extra.get("edited_steps") is None
        else extra.get("edited_steps") or [],
        **(items := _pattern_items(run)),
        "item_panel": bool(items),
        **extra,
    }


@login_required
@require_GET
def run_detail(request, pk: int):
    run = owned_run(request, pk)
    if run.get_absolute_url() != request.path:  # a pattern with a page of its own
        return redirect(run)
    return render(request, "agents_app/run_detail.html", run_context(run))


@login_required
@require_GET
def model_call(request, pk: int, call: int):
    """One model call of the trace: its prompt messages and reply (secrets blanked). The run
    page loads it when a person opens the call, so the page and its live updates stay small."""
    run = owned_run(request, pk)
    c = get_object_or_404(ModelCall, pk=call, run=run)
    ctx = {"run": run, "call": c, **call_io(c)}
    if request.htmx:
        return render(request, "agents_app/model_call.html#call-io", ctx)
    return render(request, "agents_app/model_call.html", ctx)


def render_panel(request, page: str, panel: str, ctx: dict, status: int = 200):
    """The answer to a form on a run page: its panel for htmx, the whole page otherwise."""
    return render(request, f"{page}#{panel}" if request.htmx else page, ctx, status=status)


def decide_and_show(request, run: Run, seq: int, decision: Decision, show, **invalid_extra):
    """Apply a person's decision and answer with ``show(run, status, **extra)``: 409 when the
    page was out of date, 400 with the reason when the decision cannot apply."""
    try:
        run = engine.decide(run, request.user, seq, decision)
    except engine.StaleDecision as exc:
        run.refresh_from_db()
        return show(run, 409, error=str(exc))
    except InvalidDecision as exc:
        return show(run, 400, error=str(exc), **invalid_extra)
    return show(run, 200)


RUN_PAGE = "agents_app/run_detail.html"


def _gate_answer(request, run: Run, panel: str, status: int, gate_status: str = "", **extra):
    """The answer to a gate decision: the gate's panel, and the page's status region with
    ``gate_status`` (what was decided, focused so that a screen reader says it). The status
    region is outside the panels, which live updates replace, so focus stays on it."""
    ctx = run_context(run, gate_status=gate_status, **extra)
    if not request.htmx:
        return render(request, RUN_PAGE, ctx, status=status)
    html = (render_to_string(f"{RUN_PAGE}#{panel}", ctx, request)
            + render_to_string(f"{RUN_PAGE}#gate-status", {**ctx, "oob": True}, request))
    return HttpResponse(html, status=status)


def _plan_decided(run: Run) -> str:
    last = run.approvals.order_by("-id").first()
    if last is None:
        return ""
    if last.action == "reject":
        return (f"You rejected plan v{last.plan_version}. The planner is writing a new version "
                "from your feedback.")
    edited = " with your edits" if last.edited else ""
    return f"You approved plan v{last.plan_version}{edited}. Its steps are being carried out."


def _plan_panel(request, run: Run, status: int = 200, **extra):
    if status == 200:
        extra["gate_status"] = _plan_decided(run)
    # An empty plan cannot be approved: the page opens "Reject with feedback" beside the reason.
    extra.setdefault("empty_plan", extra.get("error") == EMPTY_PLAN)
    return _gate_answer(request, run, "plan-panel", status, **extra)


@login_required
@require_POST
def plan_decision(request, pk: int):
    """The plan gate. Approving approves the steps on the screen, exactly: the form posts
    every step, so a plan whose steps were all deleted is an empty plan, refused."""
    run = owned_run(request, pk)
    form = PlanDecisionForm(request.POST)
    shown = {"edited_steps": form.shown_steps(),
             "feedback": without_control_characters(request.POST.get("feedback", ""))}
    if not form.is_valid():
        return _plan_panel(request, run, 400, error=read_errors(form), **shown)
    d = form.cleaned_data
    decision = Decision(action=d["action"], feedback=d["feedback"],
                        edits=d["steps"] if d["action"] == "approve" else None,
                        author=request.user.get_username())
    return decide_and_show(request, run, d["seq"], decision,
                           lambda r, status, **extra: _plan_panel(request, r, status, **extra),
                           **shown)


def _tool_decided(run: Run, gate: str, action: str) -> str:
    if gate == ASK_GATE:
        return "Your answer was sent to the agent; it is thinking again."
    if action == "reject":
        return "You rejected the call. The agent reads your reason and chooses another way."
    return "You approved the call. It runs now."


def _items_panel(request, run: Run, status: int = 200, **extra):
    return _gate_answer(request, run, "items-panel", status, **extra)


@login_required
@require_POST
def tool_decision(request, pk: int):
    """A person's decision at a ReAct tool gate (approve the call with the arguments on the
    screen, or reject it with a reason) or their answer to the agent's question."""
    run = owned_run(request, pk)
    gate = run.gate
    form = ToolDecisionForm(request.POST, gate=gate)
    typed = {"typed_feedback": without_control_characters(request.POST.get("feedback", ""))}
    if "args" in request.POST:
        typed["pending_args"] = without_control_characters(request.POST["args"])
    if not form.is_valid():
        return _items_panel(request, run, 400, error=read_errors(form), **typed)
    d = form.cleaned_data
    # At the approval gate the call approved is the one on the screen; the pattern compares
    # it with the proposed call to record whether it was edited.
    edits = d["args"] if d["action"] == "approve" and gate == APPROVAL_GATE else None
    decision = Decision(action=d["action"], feedback=d["feedback"], edits=edits,
                        author=request.user.get_username())

    def show(r, status, **extra):
        if status == 200:
            extra["gate_status"] = _tool_decided(r, gate, d["action"])
        return _items_panel(request, r, status, **extra)

    return decide_and_show(request, run, d["seq"], decision, show, **typed)


@login_required
@require_POST
def cancel_run(request, pk: int):
    run = owned_run(request, pk)
    message = engine.cancel(run, request.user)
    run.refresh_from_db()
    if request.htmx:
        return render(request, "agents_app/run_detail.html#header", run_context(run, notice=message))
    messages.info(request, message)  # the run page says it (and reads it out) after the redirect
    return redirect(run)


# Patterns with a page of their own (e.g. code review) register how their live updates look.
LIVE_RENDERERS: dict[str, Callable[[Run, list, set[str]], str]] = {}


def register_live_renderer(pattern: str, renderer: Callable[[Run, list, set[str]], str]) -> None:
    LIVE_RENDERERS[pattern] = renderer


def render_live(run: Run, events, panels: set[str]) -> str:
    """The WebSocket message for ``events`` of ``run``, by the page its pattern uses."""
    return LIVE_RENDERERS.get(run.pattern, render_live_update)(run, events, panels)


LIVE_MESSAGE_LIMIT = 900_000  # bytes; Daphne refuses WebSocket messages over 1 MiB


def live_message(page: str, ctx: dict, events, panels: set[str], order: tuple[str, ...], *,
                 bulky: tuple[str, ...] = (), too_large: str = "") -> str:
    """The WebSocket message for new events on ``page``: their timeline entries, then the
    ``panels`` (in ``order``) as out-of-band swaps. A message too large for one frame leaves
    out the ``bulky`` panels and adds the ``too_large`` partial, which asks the person to load
    the page."""
    parts = {"": render_to_string("agents_app/_timeline_append.html",
                                  {**ctx, "new_events": events})}
    for name in order:
        if name in panels:
            parts[name] = render_to_string(f"{page}#{name}", {**ctx, "oob": True})
    html = "\n".join(parts.values())
    if too_large and len(html.encode()) > LIVE_MESSAGE_LIMIT:
        kept = [part for name, part in parts.items() if name not in bulky]
        kept.append(render_to_string(f"{page}#{too_large}", {**ctx, "oob": True}))
        html = "\n".join(kept)
    return html


def render_live_update(run: Run, events, panels: set[str]) -> str:
    """The WebSocket message for new events: timeline entries plus refreshed panels."""
    return live_message("agents_app/run_detail.html", run_context(run), events, panels,
                        ("header", "plan-panel", "steps-panel", "items-panel", "answer-panel",
                         "calls-panel"))
