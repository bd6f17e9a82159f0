"""The run history: keyset pages, filters, and the search of tasks and answers (with the
SQLite trigram index where it exists)."""

from __future__ import annotations

import time

from django.db import connection
from django.db.models import Q

from .forms import HistoryFilterForm
from .models import Run
from .patterns import PATTERNS

PAGE_SIZE = 25


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


def search_runs(runs, q: str, before: int | None):
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


def history(request) -> dict:
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
            runs, stopped_at = search_runs(runs, d["q"], d.get("before"))
            params["q"] = d["q"]
    page = keyset_page(runs, form, params, "runs")
    if stopped_at:  # the search paused: "Older" continues below the last run it examined
        page.update(next_before=stopped_at, search_stopped_at=stopped_at)
    return {**page, "patterns": PATTERNS}
