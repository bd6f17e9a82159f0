"""A run's page shows its newest events and loads the earlier ones a page at a time (issue
37: a run of a thousand steps drew a thousand timeline entries on every load and every live
update). The pages walked back to the first event are every event once, in order; the status
line still quotes a decision older than the events shown."""

import re

import pytest
from django.urls import reverse

from agents_app import run_page
from agents_app.models import Event, Run
from agents_app.notices import DECIDED_BY

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def _run(owner, events: int, *, counted: int | None = None, decision_at: int | None = None):
    run = Run.objects.create(owner=owner, pattern="plan_execute", task="A long run",
                             status="completed", last_event_seq=events if counted is None
                             else counted)
    Event.objects.bulk_create([
        Event(run=run, seq=k, kind="note", message=f"event number {k} <b>",
              data={DECIDED_BY: owner.pk} if k == decision_at else {})
        for k in range(1, events + 1)])
    return run


def _seqs(html: str) -> list[int]:
    return [int(s) for s in re.findall(r'data-seq="(\d+)"', html)]


def _earlier(html: str) -> int | None:
    found = re.findall(r'hx-get="[^"]*/events/\?before=(\d+)"', html)
    assert len(found) <= 1, found
    return int(found[0]) if found else None


def test_the_page_shows_the_newest_events_and_earlier_ones_load_page_by_page(alice_client, alice):
    run = _run(alice, 250)
    page = alice_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    timeline = page.split('id="timeline"', 1)[1].split("</ol>", 1)[0]
    assert _seqs(timeline) == list(range(151, 251))
    assert "Show earlier events" in timeline and _earlier(timeline) == 151
    assert "event number 250 &lt;b&gt;" in timeline  # escaped
    shown, before, requests = _seqs(timeline), _earlier(timeline), 0
    while before:
        part = alice_client.get(reverse("run_events", args=[run.pk]), {"before": before},
                                headers=HTMX)
        assert part.status_code == 200
        html = part.content.decode()
        assert "<html" not in html  # the items alone, for the list
        shown = _seqs(html) + shown
        before, requests = _earlier(html), requests + 1
    assert shown == list(range(1, 251)) and requests == 2


def test_a_short_run_shows_every_event_without_a_button(alice_client, alice):
    run = _run(alice, run_page.EVENTS_SHOWN)
    page = alice_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert _seqs(page.split('id="timeline"', 1)[1]) == list(range(1, run_page.EVENTS_SHOWN + 1))
    assert "Show earlier events" not in page


def test_events_the_run_does_not_count_yet_are_left_to_the_live_channel(alice):
    run = _run(alice, 130, counted=120)  # a stage committing while the page is drawn
    ctx = run_page.run_context(run)
    assert [e.seq for e in ctx["events"]] == list(range(21, 121)) and ctx["last_seq"] == 120
    events, earlier = run_page.events_before(run, 200)
    assert [e.seq for e in events] == list(range(21, 121)) and earlier == 21


def test_the_status_line_quotes_a_decision_older_than_the_events_shown(alice):
    run = _run(alice, 300, decision_at=7)
    ctx = run_page.run_context(run)
    assert ctx["events"][0].seq == 201
    assert ctx["run_notice"].decided.startswith("At ") and "event number 7" in \
        ctx["run_notice"].decided


def test_the_earlier_events_page_without_javascript(alice_client, alice):
    run = _run(alice, 150)
    response = alice_client.get(reverse("run_events", args=[run.pk]), {"before": 51})
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    assert _seqs(html) == list(range(1, 51)) and _earlier(html) is None
    assert f'href="{run.get_absolute_url()}"' in html
    # without "before": the newest page
    assert _seqs(alice_client.get(reverse("run_events", args=[run.pk])).content.decode()) == \
        list(range(51, 151))


@pytest.mark.parametrize("before", ["x", "-3", "1e3", "99999999999", "٣"])
def test_an_unreadable_position_is_refused(alice_client, alice, before):
    run = _run(alice, 5)
    response = alice_client.get(reverse("run_events", args=[run.pk]), {"before": before})
    assert response.status_code == 400 and "before" in response.content.decode()


def test_another_person_gets_404_and_anonymous_the_sign_in(client, alice, bob):
    run = _run(alice, 5)
    url = reverse("run_events", args=[run.pk])
    response = client.get(url, {"before": 3})
    assert response.status_code == 302 and "login" in response["Location"]
    client.force_login(bob)
    assert client.get(url, {"before": 3}).status_code == 404


def test_a_member_of_the_runs_team_reads_its_earlier_events(client, alice, bob):
    from agents_app.teams.models import Membership, Team

    team = Team.objects.create(name="Platform")
    Membership.objects.create(team=team, user=alice, role="admin")
    Membership.objects.create(team=team, user=bob, role="member")
    run = _run(alice, 120)
    Run.objects.filter(pk=run.pk).update(team=team)
    client.force_login(bob)
    html = client.get(reverse("run_events", args=[run.pk]), {"before": 21},
                      headers=HTMX).content.decode()
    assert _seqs(html) == list(range(1, 21))
    Membership.objects.filter(user=bob).delete()
    assert client.get(reverse("run_events", args=[run.pk]), {"before": 21}).status_code == 404


def _events(run, n: int) -> None:
    Event.objects.bulk_create([Event(run=run, seq=k, kind="note", message=f"event number {k}")
                               for k in range(1, n + 1)])
    Run.objects.filter(pk=run.pk).update(last_event_seq=n)


def test_a_change_page_shows_the_newest_events_and_loads_the_earlier_ones(alice_client, alice):
    run = Run.objects.create(owner=alice, pattern="plan_execute_review", task="Fix the greeting",
                             status="completed")
    _events(run, 230)
    page = alice_client.get(reverse("change_detail", args=[run.pk])).content.decode()
    timeline = page.split('id="timeline"', 1)[1].split("</ol>", 1)[0]
    assert _seqs(timeline) == list(range(131, 231)) and _earlier(timeline) == 131
    part = alice_client.get(reverse("run_events", args=[run.pk]), {"before": 131},
                            headers=HTMX).content.decode()
    assert _seqs(part) == list(range(31, 131)) and _earlier(part) == 31
    # the events page of a change run leads back to the change page
    html = alice_client.get(reverse("run_events", args=[run.pk]), {"before": 31}).content.decode()
    assert _seqs(html) == list(range(1, 31))
    assert f'href="{reverse("change_detail", args=[run.pk])}"' in html


def test_a_review_page_shows_the_newest_events_and_loads_the_earlier_ones(client, alice, bob):
    from reviews_app.models import Review

    run = Run.objects.create(owner=alice, pattern="code_review", task="a diff",
                             status="completed")
    review = Review.objects.create(run=run, owner=alice, source_kind="paste", source_label="x",
                                   diff_text="")
    _events(run, 101)
    client.force_login(alice)
    page = client.get(reverse("review_detail", args=[review.pk])).content.decode()
    timeline = page.split('id="timeline"', 1)[1].split("</ol>", 1)[0]
    assert _seqs(timeline) == list(range(2, 102)) and _earlier(timeline) == 2
    part = client.get(reverse("run_events", args=[run.pk]), {"before": 2},
                      headers=HTMX).content.decode()
    assert _seqs(part) == [1] and _earlier(part) is None
    client.force_login(bob)  # another person: neither the page nor its events
    assert client.get(reverse("review_detail", args=[review.pk])).status_code == 404
    assert client.get(reverse("run_events", args=[run.pk]), {"before": 2}).status_code == 404
