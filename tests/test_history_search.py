"""The history search: through the trigram index (runs past the first window, updated and
deleted runs), and a search paused by its time limit continuing through "Older"; always
equal to a plain icontains over every run."""

import pytest
from django.db.models import Q
from django.urls import reverse

from agents_app import search
from agents_app.models import Run

pytestmark = pytest.mark.django_db


def _walk(client, params):
    shown, before = [], None
    for _ in range(50):
        ctx = client.get(reverse("dashboard"), {**params, **({"before": before} if before else {})}).context
        shown += [r.pk for r in ctx["runs"]]
        before = ctx["next_before"]
        if not before:
            return shown
    raise AssertionError("too many pages")


def test_search_beyond_the_window_uses_the_index_and_matches_icontains(client, django_user_model, monkeypatch):
    alice = django_user_model.objects.create_user("alice")
    client.force_login(alice)
    monkeypatch.setattr(search, "SEARCH_WINDOW", 5)
    for i in range(60):
        Run.objects.create(owner=alice, pattern="plan_execute", task=f"task {i}" + (" Needle here" if i % 7 == 0 else ""),
                           status="completed" if i % 2 else "failed",
                           answer="an answer with a NEEDLE" if i % 11 == 0 else "")
    late = Run.objects.create(owner=alice, pattern="plan_execute", task="no match yet")
    late.answer = "found the needle later"  # an update re-indexes the run
    late.save()
    gone = Run.objects.create(owner=alice, pattern="plan_execute", task="needle, then deleted")
    gone.delete()
    assert search._search_index_ready()
    for params in ({"q": "needle"}, {"q": "eedl", "status": "failed"}, {"q": "nothing like it"}):
        runs = Run.objects.filter(owner=alice, **({"status": params["status"]} if "status" in params else {}))
        truth = list(runs.filter(Q(task__icontains=params["q"]) | Q(answer__icontains=params["q"]))
                     .order_by("-id").values_list("id", flat=True))
        assert _walk(client, params) == truth


def test_a_search_that_runs_out_of_time_continues_where_it_stopped(client, django_user_model, monkeypatch):
    alice = django_user_model.objects.create_user("alice")
    client.force_login(alice)
    monkeypatch.setattr(search, "SEARCH_WINDOW", 4)
    monkeypatch.setattr(search, "SEARCH_SECONDS", 0)  # every step is the last of its request
    ids = [Run.objects.create(owner=alice, pattern="plan_execute", task=f"t{i}" + (" xyzzy" if i in (3, 17) else "")).pk
           for i in range(30)]
    response = client.get(reverse("dashboard"), {"q": "xy"})  # shorter than a trigram: no index
    assert response.context["search_stopped_at"] == response.context["next_before"]
    assert "searches further back" in response.content.decode()
    assert _walk(client, {"q": "xy"}) == [ids[17], ids[3]]
    assert _walk(client, {"q": "xyzzy"}) == [ids[17], ids[3]]
