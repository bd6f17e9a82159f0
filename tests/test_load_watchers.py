"""Load: 200 WebSocket clients watching one busy run through the real stack (Daphne, Redis, a
Celery worker) each receive every event exactly once, in order, including clients that join
while the run is under way (they catch up from the database, then follow live).

The clients behave like the run page: signed in with a session cookie, they send
``{"after": N}`` with the last event they have, and when a connection fails or drops they
connect again and say where they are. The figures (delivery latency, messages) come from
``tests/benchmarks/bench_watchers.py``, which shares the client code."""

import asyncio

import pytest

from agents_app import engine
from agents_app.models import Event
from agents_app.tasks import advance_run
from tests.benchmarks.bench_watchers import MODELS, OPTIONS, TASK, check, watch_run
from tests.stack import free_port, start_web, start_worker

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CLIENTS, LATE = 200, 50


@pytest.fixture
def watched_stack(django_db_setup, redis_server, stack_dir):
    port = free_port()
    worker = start_worker(stack_dir, node="watchers", concurrency=8,
                          QUORUM_OFFLINE_LATENCY="0.2")
    web = start_web(stack_dir, port)
    yield f"http://127.0.0.1:{port}"
    web.stop()
    worker.stop()


def test_200_watchers_of_a_busy_run_each_receive_every_event_once_in_order(
        watched_stack, alice, client):
    client.force_login(alice)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    run = engine.create_run(alice, "plan_execute", TASK, options=OPTIONS, models=MODELS,
                            enqueue=False)

    watchers = asyncio.run(watch_run(watched_stack, cookie, run.pk,
                                     lambda: advance_run.delay(run.pk),
                                     clients=CLIENTS, late=LATE, timeout=40))

    run.refresh_from_db()
    assert run.status == "completed"
    seqs = list(Event.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, run.last_event_seq + 1)) and len(seqs) > 30  # a busy run
    assert check(watchers, run.last_event_seq) == []
    assert sum(w.late for w in watchers) == LATE
