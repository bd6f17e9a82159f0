"""The dashboard's history of runs: filters (status or status group, pattern, date range, model,
cost range), search words, and sorts, paged with keyset cursors.

Newest first (the default) pages by id (``before``), as it always has. Another order pages by
``after``: the id of the last run shown, whose own sort key the next page continues from —
``(key, id)`` after the anchor's in the chosen direction — so ties never repeat or skip a run and
no page counts or offsets. Each sort key has an index that starts with the owner (migration
0007), so a page reads the runs it shows, not the whole history.

A search, and the model filter (no index can say which runs use a model in any role), read runs
newest first within a time limit (``search``); they keep that order whatever sort is asked, and
the page says so."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from functools import reduce
from operator import or_

from django.db import connection
from django.db.models import F, Q
from django.utils import timezone

from .forms import SORTS, HistoryFilterForm
from .models import Run, run_duration, run_tokens, status_groups
from .patterns import PATTERNS
from .search import PAGE_SIZE, search_runs, search_terms
from .teams.access import visible, visible_branches

DEFAULT_SORT = "-started"
COLUMNS = ("id", "pattern", "task", "status", "models_used", "offline", "cost_usd", "created_at",
           "finished_at", "prompt_tokens", "completion_tokens", "merge_request__status")


@dataclass(frozen=True)
class SortKey:
    """What a sort orders by: an expression (``None``: the id itself) and its direction."""

    expression: object
    descending: bool


def sort_key(sort: str) -> SortKey:
    descending = sort.startswith("-")
    field = sort.lstrip("-")
    expression = {"started": None, "cost": F("cost_usd"), "tokens": run_tokens(),
                  "duration": run_duration(longest_first=descending),
                  "created": F("created_at")}[field]
    return SortKey(expression, descending)


def _filtered(runs, d: dict):
    """``runs`` narrowed by every usable filter but the search words."""
    if status := d.get("status"):
        groups = {key: statuses for key, _, statuses in status_groups()}
        runs = runs.filter(status__in=groups[status]) if status in groups else \
            runs.filter(status=status)
    if d.get("pattern"):
        runs = runs.filter(pattern=d["pattern"])
    zone = timezone.get_current_timezone()
    if d.get("start"):
        runs = runs.filter(created_at__gte=dt.datetime.combine(d["start"], dt.time.min, zone))
    if d.get("end"):
        day_after = d["end"] + dt.timedelta(days=1)
        runs = runs.filter(created_at__lt=dt.datetime.combine(day_after, dt.time.min, zone))
    if d.get("min_cost") is not None:
        runs = runs.filter(cost_usd__gte=d["min_cost"])
    if d.get("max_cost") is not None:
        runs = runs.filter(cost_usd__lte=d["max_cost"])
    return runs


def uses_model(model: str) -> Q:
    """Some role of the run uses ``model``: its name as a JSON string in ``models_used`` (role →
    model), which one LIKE finds on both databases (role names never look like model names)."""
    quoted = json.dumps(model, ensure_ascii=connection.vendor != "postgresql")
    return Q(models_used__icontains=quoted)


def recent_models(user, limit: int = 300) -> list[str]:
    """The models of the person's newest runs and the configured defaults, for the model
    filter's suggestions."""
    from django.conf import settings

    names = {settings.QUORUM_DEFAULT_MODEL, *settings.QUORUM_ROLE_MODELS.values()}
    for used in Run.objects.filter(owner=user).order_by("-id").values_list(
            "models_used", flat=True)[:limit]:
        names.update(v for v in (used or {}).values() if isinstance(v, str))
    return sorted(n for n in names if n)


class CursorGone(Exception):
    """The page position names no run this person may see (deleted, another's, or made up)."""


def _sorted_page(runs, owner, sort: str, after: int | None, branches=()):
    """One page of ``runs`` in the order ``sort``, after the run ``after``. With ``branches``
    (the filters whose OR is what the person may see: their personal runs, their teams'…),
    a page by a key is read from each branch in its own index order and the pages merged:
    no index orders their OR, and PostgreSQL sorted every run of the team (0.5 s for a team
    of 100,000 runs)."""
    key = sort_key(sort)
    if key.expression is None:  # by id
        if after:
            runs = runs.filter(id__lt=after) if key.descending else runs.filter(id__gt=after)
        order = ("-id",) if key.descending else ("id",)
    else:
        runs = runs.alias(sort_key=key.expression)
        if after:
            # Any run the person may see (a team's run another member started too).
            anchor = list(visible(Run.objects, owner).filter(pk=after).annotate(
                sort_key=key.expression).values_list("sort_key", flat=True))
            if not anchor:
                raise CursorGone()
            value = anchor[0]
            if key.descending:  # (key, id) below the anchor's; the first bound is the index range
                runs = runs.filter(Q(sort_key__lte=value),
                                   Q(sort_key__lt=value) | Q(id__lt=after))
            else:
                runs = runs.filter(Q(sort_key__gte=value),
                                   Q(sort_key__gt=value) | Q(id__gt=after))
        order = ("-sort_key", "-id") if key.descending else ("sort_key", "id")
        if len(branches) > 1:  # ``runs`` holds their OR already: each narrows it to one
            rows = {r.pk: r for branch in branches for r in runs.filter(branch).annotate(
                sort_key=key.expression).order_by(*order)[:PAGE_SIZE + 1]}
            page = sorted(rows.values(), key=lambda r: (r.sort_key, r.pk),
                          reverse=key.descending)[:PAGE_SIZE + 1]
            return page[:PAGE_SIZE], len(page) > PAGE_SIZE
    page = list(runs.order_by(*order)[:PAGE_SIZE + 1])
    return page[:PAGE_SIZE], len(page) > PAGE_SIZE


def history(request) -> dict:
    """The history's context: the page of runs, the form, the parameters the pager and the
    column headers carry, and the message about values that could not be used."""
    form = HistoryFilterForm(request.GET or None)
    d = form.usable()
    problems = form.problems()
    branches = visible_branches(request.user, run="pk")
    runs = _filtered(Run.objects.filter(reduce(or_, branches)).only(*COLUMNS)
                     .select_related("merge_request"), d)
    params = {name: d[name] for name in ("status", "pattern", "q", "model") if d.get(name)}
    params.update({form.PARAM_NAMES.get(n, n): str(d[n])
                   for n in ("start", "end", "min_cost", "max_cost") if n in d})
    sort = d.get("sort") or DEFAULT_SORT
    terms = search_terms(d.get("q", ""))
    notice, stopped_at, cursor = "", None, None
    if terms or d.get("model"):  # no index serves these: read newest first, within a time limit
        if sort != DEFAULT_SORT:
            what = "Search results" if terms else "Runs of one model"
            notice = (f"{what} are listed newest first; “{SORTS[sort]}” applies without search "
                      "words or a model.")
            sort = DEFAULT_SORT
        runs, stopped_at = search_runs(runs, terms, d.get("before"),
                                       uses_model(d["model"]) if d.get("model") else None)
    filter_params = dict(params)
    if sort != DEFAULT_SORT:
        filter_params["sort"] = sort
    # A date range lists its runs newest first by their start (id order is the same but for
    # runs started within moments of each other), paged by ``after``: the (owner, created_at)
    # index serves that from the range's end, where id order would read every run newer than
    # the range to reach it (a month a year ago: 110,000 runs of a million, 0.35 s on
    # PostgreSQL).
    by_start = (sort == DEFAULT_SORT and not d.get("before")
                and not (terms or d.get("model")) and bool(d.get("start") or d.get("end")))
    if sort == DEFAULT_SORT and not d.get("after") and not by_start:
        before = d.get("before")
        page, more = _sorted_page(runs.filter(id__lt=before) if before else runs, request.user,
                                  DEFAULT_SORT, None)
        if stopped_at:  # the search paused: "Older" continues below the last run it examined
            cursor = {"before": stopped_at}
        elif more:
            cursor = {"before": page[-1].pk}
        first = not before
    else:
        try:
            page, more = _sorted_page(runs, request.user, "-created" if by_start else sort,
                                      d.get("after"), branches)
        except CursorGone:
            problems.append(("Page position", "That run is not in your history; the list starts "
                             "from the top."))
            page, more = _sorted_page(runs, request.user, "-created" if by_start else sort,
                                      None, branches)
            d.pop("after")
        cursor = {"after": page[-1].pk} if more else None
        first = not d.get("after")
    return {"runs": page, "filter_form": form, "filter_params": filter_params,
            "next_cursor": cursor, "next_before": (cursor or {}).get("before"),
            "next_after": (cursor or {}).get("after"), "is_first_page": first,
            "search_stopped_at": stopped_at, "sort": sort, "sorts": SORTS,
            "header_sorts": _header_sorts(params, sort), "history_notice": notice,
            "filter_problems": problems, "patterns": PATTERNS}


def _header_sorts(params: dict, sort: str) -> dict[str, dict]:
    """For each sortable column: the query that sorts by it (largest first, or the other way
    when it is already so) and how it is sorted now, for the table's headers."""
    from django.utils.http import urlencode

    out = {}
    for field in ("cost", "tokens", "duration", "started"):
        now = "desc" if sort == f"-{field}" else "asc" if sort == field else ""
        target = field if now == "desc" else f"-{field}"
        query = {**params, **({"sort": target} if target != DEFAULT_SORT else {})}
        out[field] = {"query": urlencode(query), "now": now}
    return out
