"""The history as a person narrows it: search words (not one phrase), statuses grouped the
way people think of them, a date range, a model, a cost range, and sorting by cost, tokens and
duration with keyset pages; every bad value answers with a message that names it, never a 500."""

import datetime as dt
import re
from decimal import Decimal

import pytest
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from agents_app.models import Run

pytestmark = pytest.mark.django_db


def make(owner, task="a task", **fields):
    return Run.objects.create(owner=owner, pattern=fields.pop("pattern", "plan_execute"),
                              task=task, **fields)


def shown(client, **params):
    response = client.get(reverse("dashboard"), params)
    assert response.status_code == 200
    return [r.pk for r in response.context["runs"]]


def walk(client, params, cursor="before"):
    """Every page of the history for ``params``, following the pager's own cursor."""
    ids, seen = [], 0
    response = client.get(reverse("dashboard"), params)
    while True:
        ctx = response.context
        ids += [r.pk for r in ctx["runs"]]
        seen += 1
        assert seen < 40, "too many pages"
        if not ctx["next_cursor"]:
            return ids
        response = client.get(reverse("dashboard"), {**params, **ctx["next_cursor"]})


# --- search words ------------------------------------------------------------------------------
def test_search_words_find_runs_holding_every_word_in_any_order(alice_client, alice):
    both = make(alice, "Move from MySQL to PostgreSQL")
    split = make(alice, "Plan the PostgreSQL upgrade", answer="then retire the old mysql host")
    make(alice, "Only MySQL here")
    make(alice, "Only PostgreSQL here")
    assert shown(alice_client, q="MySQL PostgreSQL") == [split.pk, both.pk]
    assert shown(alice_client, q="  postgresql   MYSQL ") == [split.pk, both.pk]


def test_a_quoted_phrase_stays_one_phrase(alice_client, alice):
    exact = make(alice, "restore the schema from last night")
    make(alice, "the schema was fine; restore nothing")
    assert shown(alice_client, q='"restore the schema"') == [exact.pk]
    assert len(shown(alice_client, q="restore the schema")) == 2


def test_search_words_through_the_trigram_index_match_a_plain_scan(alice_client, alice, monkeypatch):
    from agents_app import search

    monkeypatch.setattr(search, "SEARCH_WINDOW", 4)
    runs = [make(alice, f"run {i}" + (" alpha" if i % 3 == 0 else "") + (" beta" if i % 4 == 0 else ""),
                 answer="zz" if i % 5 == 0 else "") for i in range(60)]
    truth = [r.pk for r in reversed(runs) if "alpha" in r.task and "beta" in r.task]
    assert walk(alice_client, {"q": "beta alpha"}) == truth
    # A word too short for the index still narrows the results.
    truth = [r.pk for r in reversed(runs) if "alpha" in r.task and "zz" in r.answer]
    assert walk(alice_client, {"q": "alpha zz"}) == truth


# --- status groups -----------------------------------------------------------------------------
def test_statuses_are_grouped_as_people_think_of_them(alice_client, alice):
    by = {s: make(alice, s, status=s).pk for s in (
        "awaiting_plan_approval", "awaiting_tool_approval", "awaiting_triage", "queued",
        "executing", "reviewing", "completed", "cancelled", "failed", "budget_exceeded")}
    assert set(shown(alice_client, status="all_waiting")) == {
        by["awaiting_plan_approval"], by["awaiting_tool_approval"], by["awaiting_triage"]}
    assert set(shown(alice_client, status="all_running")) == {
        by["queued"], by["executing"], by["reviewing"]}
    assert set(shown(alice_client, status="all_finished")) == {by["completed"], by["cancelled"]}
    assert set(shown(alice_client, status="all_failed")) == {by["failed"], by["budget_exceeded"]}
    assert shown(alice_client, status="executing") == [by["executing"]]  # a detailed one
    page = alice_client.get(reverse("dashboard")).content.decode()
    for label in ("Waiting for me", "Running", "Finished", "Failed"):
        assert f'<optgroup label="{label}">' in page
    assert "Awaiting plan approval" in page  # the detailed statuses are inside the groups


# --- filters -----------------------------------------------------------------------------------
def test_date_range_model_and_cost_filters(alice_client, alice):
    now = timezone.now()
    old = make(alice, "old", models_used={"planner": "gpt-4o"}, cost_usd=Decimal("0.5"))
    Run.objects.filter(pk=old.pk).update(created_at=now - dt.timedelta(days=40))
    mid = make(alice, "mid", models_used={"planner": "gpt-4o-mini", "executor": "gpt-4o"},
               cost_usd=Decimal("0.02"))
    Run.objects.filter(pk=mid.pk).update(created_at=now - dt.timedelta(days=10))
    new = make(alice, "new", models_used={"agent": "offline/default"})
    today = timezone.localdate()
    assert shown(alice_client, **{"from": str(today - dt.timedelta(days=20))}) == [new.pk, mid.pk]
    assert shown(alice_client, to=str(today - dt.timedelta(days=11))) == [old.pk]
    assert shown(alice_client, **{"from": str(today - dt.timedelta(days=10)),
                                  "to": str(today - dt.timedelta(days=10))}) == [mid.pk]
    assert shown(alice_client, model="gpt-4o") == [mid.pk, old.pk]
    assert shown(alice_client, model="offline/default") == [new.pk]
    assert shown(alice_client, min_cost="0.01") == [mid.pk, old.pk]
    assert shown(alice_client, max_cost="0.1") == [new.pk, mid.pk]
    assert shown(alice_client, min_cost="0.01", max_cost="0.1") == [mid.pk]
    page = alice_client.get(reverse("dashboard")).content.decode()
    assert '<option value="gpt-4o-mini">' in page  # the models the person has used, offered


# --- sorting -----------------------------------------------------------------------------------
@pytest.fixture
def spread(alice):
    """Runs with ties on every key, so the pages must order them by id as well."""
    runs = []
    start = timezone.now() - dt.timedelta(hours=2)
    for i in range(57):
        run = make(alice, f"run {i}", cost_usd=Decimal(i % 7) / 100, prompt_tokens=(i % 5) * 100,
                   completion_tokens=i % 3, status="completed" if i % 6 else "executing")
        finished = None if i % 6 == 0 else start + dt.timedelta(seconds=(i % 4) * 30)
        Run.objects.filter(pk=run.pk).update(created_at=start, finished_at=finished)
        runs.append(Run.objects.get(pk=run.pk))
    return runs


@pytest.mark.parametrize("sort, key", [
    ("-cost", lambda r: (-r.cost_usd, -r.pk)),
    ("cost", lambda r: (r.cost_usd, r.pk)),
    ("-tokens", lambda r: (-r.total_tokens, -r.pk)),
    ("tokens", lambda r: (r.total_tokens, r.pk)),
    # Runs still going have no duration yet: after the others, whichever the direction.
    ("-duration", lambda r: (r.duration_seconds is None, -(r.duration_seconds or 0), -r.pk)),
    ("duration", lambda r: (r.duration_seconds is None, r.duration_seconds or 0, r.pk)),
    ("started", lambda r: r.pk),
])
def test_sorting_pages_through_every_run_once_in_order(alice_client, spread, sort, key):
    expected = [r.pk for r in sorted(spread, key=key)]
    assert walk(alice_client, {"sort": sort}) == expected


def test_sorting_keeps_the_filters_and_the_pager_carries_both(alice_client, spread):
    ctx = alice_client.get(reverse("dashboard"), {"sort": "-cost", "status": "all_finished"}).context
    assert all(r.status == "completed" for r in ctx["runs"])
    assert ctx["next_cursor"] and "after" in ctx["next_cursor"]
    html = alice_client.get(reverse("dashboard"), {"sort": "-cost", "status": "all_finished"}).content.decode()
    assert f"after={ctx['next_cursor']['after']}" in html and "sort=-cost" in html
    # The newest-first order keeps its cursor, unchanged.
    assert "before" in alice_client.get(reverse("dashboard")).context["next_cursor"]


def test_the_table_headers_sort(alice_client, spread):
    html = alice_client.get(reverse("dashboard")).content.decode()
    for key in ("cost", "tokens", "duration"):
        assert f"sort=-{key}" in html


def test_a_search_keeps_newest_first_and_says_so_when_a_sort_is_asked(alice_client, spread):
    response = alice_client.get(reverse("dashboard"), {"q": "run", "sort": "-cost"})
    assert response.status_code == 200
    ids = [r.pk for r in response.context["runs"]]
    assert ids == sorted(ids, reverse=True)
    assert "newest first" in response.content.decode()


# --- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize("params, says", [
    ({"sort": "owner__password"}, "Sort"),
    ({"sort": "-cost\x00"}, "Sort"),
    ({"status": "all_everything"}, "Status"),
    ({"from": "2024-02-30"}, "From"),
    ({"from": "9999-12-31"}, "From"),
    ({"to": "0001-01-01"}, "To"),
    ({"from": "yesterday"}, "From"),
    ({"from": "2025-03-10", "to": "2025-03-01"}, "after"),
    ({"min_cost": "-1"}, "Min cost"),
    ({"max_cost": "9" * 40}, "Max cost"),
    ({"min_cost": "nan"}, "Min cost"),
    ({"min_cost": "0.5", "max_cost": "0.1"}, "more than"),
    ({"model": "x" * 300}, "Model"),
    ({"model": "gpt\x00"}, "Model"),
    ({"q": "a\x00b"}, "Search"),
    ({"before": "9" * 30}, "position"),
    ({"after": "-5", "sort": "-cost"}, "position"),
    ({"after": "987654", "sort": "cost"}, "position"),  # no such run: a clear message
])
def test_bad_filters_answer_with_a_message_that_names_them(alice_client, alice, params, says):
    make(alice, "visible")
    for headers in ({}, {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "history"}):
        response = alice_client.get(reverse("dashboard"), params, **headers)
        assert response.status_code == 200
        assert says in problem(response), response.content.decode()[-2000:]


def problem(response) -> str:
    """The history's message about the filters it could not use."""
    found = re.search(r'<p class="error" role="alert">([^<]*(?:<[^/][^>]*>[^<]*</\w+>[^<]*)*)</p>',
                      response.content.decode())
    assert found, "no message about the filters"
    assert "were not understood" in found.group(1)
    return found.group(1)


def test_another_users_run_is_no_cursor(alice_client, alice, bob):
    theirs = make(bob, "bob's run", cost_usd=Decimal("0.3"))
    make(alice, "mine")
    response = alice_client.get(reverse("dashboard"), {"sort": "-cost", "after": theirs.pk})
    assert "bob&#x27;s run" not in response.content.decode() and "position" in problem(response)


def test_the_model_filter_reads_within_the_time_limit_and_continues_through_older(
        alice_client, alice, monkeypatch):
    from agents_app import search

    monkeypatch.setattr(search, "SEARCH_WINDOW", 4)
    monkeypatch.setattr(search, "SEARCH_SECONDS", 0)  # every step is the last of its request
    runs = [make(alice, f"run {i}", models_used={"planner": "rare/model" if i in (2, 19) else "gpt-4o"})
            for i in range(30)]
    assert walk(alice_client, {"model": "rare/model"}) == [runs[19].pk, runs[2].pk]
    response = alice_client.get(reverse("dashboard"), {"model": "rare/model", "sort": "-cost"})
    assert "newest first" in response.content.decode()


def test_a_team_member_pages_a_sort_past_a_run_another_member_started(client, alice, bob):
    """The page position of a sorted list may be a team's run someone else started (issue 37:
    it was looked up among the person's own runs, and the list started again from the top)."""
    from agents_app.teams.models import Membership, Team

    team = Team.objects.create(name="Platform")
    for user in (alice, bob):
        Membership.objects.create(team=team, user=user, role="member")
    for i in range(60):
        make(alice if i % 2 else bob, f"run {i}", team=team, cost_usd=Decimal(i % 13) / 100)
    make(bob, "personal", cost_usd=Decimal("0.5"))
    client.force_login(bob)
    pages = walk(client, {"sort": "-cost"}, cursor="after")
    runs = Run.objects.filter(Q(team=team) | Q(owner=bob, team=None))
    assert pages == list(runs.order_by("-cost_usd", "-id").values_list("id", flat=True))
    response = client.get(reverse("dashboard"), {"sort": "-cost", "after": pages[24]})
    assert not response.context["filter_problems"]
    assert [r.pk for r in response.context["runs"]] == pages[25:50]


def test_a_date_range_lists_by_start_time_and_pages_every_run_once(alice_client, alice):
    """Issue 37: a date range is listed newest first by start time (the (owner, created_at)
    index reads it from the range's end), paged with ``after``; each run once, in order."""
    now = timezone.now()
    runs = [make(alice, f"run {i}") for i in range(60)]
    for i, run in enumerate(runs):  # start times not in id order, and some equal
        Run.objects.filter(pk=run.pk).update(created_at=now - dt.timedelta(days=2, minutes=(i * 7) % 30))
    make(alice, "today")  # outside the range
    day = timezone.localdate(now - dt.timedelta(days=2))
    params = {"from": str(day - dt.timedelta(days=1)), "to": str(day + dt.timedelta(days=1))}
    response = alice_client.get(reverse("dashboard"), params)
    assert "after" in (response.context["next_cursor"] or {})
    expected = list(Run.objects.filter(pk__in=[r.pk for r in runs]).order_by(
        "-created_at", "-id").values_list("id", flat=True))
    assert walk(alice_client, params, cursor="after") == expected
