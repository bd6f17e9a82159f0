"""Keyset pages of a history list, and the history's search of tasks and answers: words (each
must appear in the task or the answer, in any order; a "quoted phrase" is one word), through a
trigram index where it exists (SQLite's FTS5 table, migration 0006; PostgreSQL's ``pg_trgm``
GIN indexes, migration 0013). The filters and sorts are in ``history``."""

from __future__ import annotations

import re
import time
from functools import reduce
from operator import and_

from django.db import OperationalError, connection, transaction
from django.db.models import Q, TextField, Value
from django.db.models.functions import Coalesce
from django.db.models.lookups import IContains

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
PG_SEARCH_INDEX = ("run_task_trgm", "run_answer_trgm")


def _search_index_ready() -> bool:
    """The trigram index of tasks and answers exists: on SQLite the FTS5 table (migration 0006)
    and the triggers that keep it current (a table rebuild by a later migration drops the
    triggers); on PostgreSQL both GIN indexes of ``UPPER(task)`` and ``UPPER(answer)``
    (migration 0013), valid (a concurrent build that failed leaves an invalid one)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = "
                           "i.indexrelid WHERE c.relname IN (%s, %s) AND i.indisvalid",
                           PG_SEARCH_INDEX)
            return cursor.fetchone()[0] == len(PG_SEARCH_INDEX)
    if connection.vendor != "sqlite":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sqlite_master WHERE name IN (%s, %s, %s, %s)",
                       SEARCH_INDEX)
        return cursor.fetchone()[0] == len(SEARCH_INDEX)


_TERM = re.compile(r'"([^"]*)"|(\S+)')


def search_terms(q: str) -> list[str]:
    """The words of a search, each once, in order: ``MySQL "read replica" postgres`` →
    ``["MySQL", "read replica", "postgres"]`` (a quote left open runs to the end)."""
    terms: dict[str, None] = {}
    for phrase, word in _TERM.findall((q or "") + ('"' if (q or "").count('"') % 2 else "")):
        term = " ".join((phrase if phrase else word).split())
        if term and term.lower() not in {t.lower() for t in terms}:
            terms[term] = None
    return list(terms)


def text_filter(terms: list[str], *, indexed: bool = True) -> Q:
    """Every term in the task or the answer (``icontains``, on both databases). With
    ``indexed=False`` on PostgreSQL the same match is written as ``COALESCE(task, '')`` (the
    columns are never NULL), which the trigram indexes of ``UPPER(task)`` do not serve: for the
    newest runs read directly, where PostgreSQL would otherwise build the index's bitmap of
    every run holding a common word (tens of milliseconds) to check a window of 2,000."""
    if indexed or connection.vendor != "postgresql":
        return reduce(and_, (Q(task__icontains=t) | Q(answer__icontains=t) for t in terms), Q())

    def column(name: str):
        return Coalesce(name, Value(""), output_field=TextField())

    return reduce(and_, (Q(IContains(column("task"), t)) | Q(IContains(column("answer"), t))
                         for t in terms), Q())


def _search_candidates(terms: list[str], below: int, limit: int) -> list[int]:
    """Ids under ``below``, newest first, of runs whose task or answer hold every trigram of
    every term (of three letters or more): a superset of the runs holding every term."""
    trigrams = dict.fromkeys(t[i:i + 3] for t in terms for i in range(len(t) - 2))
    match = " AND ".join('"{}"'.format(t.replace('"', '""')) for t in trigrams)
    with connection.cursor() as cursor:
        cursor.execute("SELECT rowid FROM agents_app_run_search WHERE agents_app_run_search "
                       "MATCH %s AND rowid < %s ORDER BY rowid DESC LIMIT %s", [match, below, limit])
        return [row[0] for row in cursor.fetchall()]


def search_runs(runs, terms: list[str], before: int | None, also: Q | None = None):
    """``runs`` whose task or answer contains every term (``icontains``) and that match
    ``also`` (a filter no index serves, like the model filter), as many as one history page
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
    index.) A term shorter than three letters has no trigram: the index narrows by the others,
    and is not used when no term is long enough. On PostgreSQL the same ``icontains`` is
    served by the GIN trigram indexes themselves (``_search_postgres``)."""
    text = text_filter(terms) & (also or Q())
    # the index knows trigrams, nothing shorter
    indexed = any(len(t) >= 3 for t in terms) and _search_index_ready()
    deadline = time.monotonic() + SEARCH_SECONDS
    found: list[int] = []
    windows = _Windows(runs, text_filter(terms, indexed=False) & (also or Q()), found, before)
    while True:
        if windows.read():  # a full page, or every run has been read
            return runs.filter(id__in=found), None
        if indexed and connection.vendor == "postgresql":
            # One window (where a common word fills the page), then the index's query, which
            # PostgreSQL narrows by the other filters too (SQLite's candidates are every
            # user's, hence the count below).
            break
        if time.monotonic() >= deadline:
            return runs.filter(id__in=found), windows.cursor_id
        if indexed:
            # Few runs left (e.g. a narrow status filter): reading them beats the index, whose
            # candidates come from every run of every user.
            rest = runs.filter(id__lt=windows.cursor_id).values("id")[
                :SEARCH_WINDOW * 4 + 1].count()
            if rest > SEARCH_WINDOW * 4:
                break
            indexed = False
    cursor_id = windows.cursor_id
    if connection.vendor == "postgresql":
        return _search_postgres(runs, text, windows, deadline)
    size = 64
    while True:
        candidates = _search_candidates(terms, cursor_id, size)
        if candidates:
            found += runs.filter(text, id__in=candidates).order_by("-id").values_list(
                "id", flat=True)[:PAGE_SIZE + 1 - len(found)]
        if len(found) > PAGE_SIZE or len(candidates) < size:  # full, or no candidate left
            return runs.filter(id__in=found), None
        cursor_id, size = candidates[-1], min(size * 4, 1024)
        if time.monotonic() >= deadline:
            return runs.filter(id__in=found), cursor_id


class _Windows:
    """The newest runs read directly, ``SEARCH_WINDOW`` at a time, from ``before`` down;
    ``found`` collects the ids that match ``text``."""

    def __init__(self, runs, text: Q, found: list[int], before: int | None):
        self.runs, self.text, self.found, self.cursor_id = runs, text, found, before

    def read(self) -> bool:
        """Read the next window; True when the page is full or no run is left to read."""
        scoped = self.runs.filter(id__lt=self.cursor_id) if self.cursor_id else self.runs
        edge = list(scoped.order_by("-id").values_list("id", flat=True)
                    [SEARCH_WINDOW - 1:SEARCH_WINDOW])
        window = scoped.filter(id__gte=edge[0]) if edge else scoped
        self.found += window.filter(self.text).order_by("-id").values_list(
            "id", flat=True)[:PAGE_SIZE + 1 - len(self.found)]
        if len(self.found) > PAGE_SIZE or not edge:
            return True
        self.cursor_id = edge[0]
        return False


# PostgreSQL: the least time the index's query is given, however little of the request's is left.
PG_MIN_MS = 20


def _search_postgres(runs, text: Q, windows: _Windows, deadline: float):
    """The rest of ``search_runs`` on PostgreSQL, below the last window read: one query, the
    same filter (``UPPER(task) LIKE UPPER('%word%')`` …), which the GIN trigram indexes of
    migration 0013 serve — PostgreSQL reads from them the runs holding every trigram of every
    word and checks those. For rare words that is a few runs and a few milliseconds. Words
    made of common trigrams ("the", "schema") make the index list most runs, and the query
    would take seconds: it runs under a ``statement_timeout`` of the time left (``SET LOCAL``,
    its transaction only); cancelled, the search reads on directly until its time is up and
    "Older" continues from there, as on SQLite."""
    found = windows.found
    budget_ms = max(PG_MIN_MS, int((deadline - time.monotonic()) * 1000))
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT set_config('statement_timeout', %s, true)", [str(budget_ms)])
            found += runs.filter(text, id__lt=windows.cursor_id).order_by("-id").values_list(
                "id", flat=True)[:PAGE_SIZE + 1 - len(found)]
        return runs.filter(id__in=found), None
    except OperationalError as exc:
        if getattr(exc.__cause__, "sqlstate", None) != "57014":  # not query_canceled
            raise
    while time.monotonic() < deadline:
        if windows.read():
            return runs.filter(id__in=found), None
    return runs.filter(id__in=found), windows.cursor_id
