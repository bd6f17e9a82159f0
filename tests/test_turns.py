"""Turns (common/turns.py): at most N task threads of a worker run at once, a thread gives its
turn up while it waits outside the process (a model call, a child process, a parallel stage's
jobs, a pause), and a turn never stops the work for longer than PATIENCE.

Each test has one thread hold the only turn and start a wait, while a second thread queues for
a turn: the second gets it during the wait only if the wait gave the turn up. Without that, the
second would get it after the first is done, and the order of the log would be the other way
round."""

from __future__ import annotations

import threading
import time

import pytest

from agents_app.llm.gateway import Gateway, GatewayConfig
from agents_app.patterns.parallel import run_parallel
from common import proc, turns


@pytest.fixture(autouse=True)
def one_turn():
    turns.enable(1)
    yield
    turns.give_back()
    turns.enable(0)


class Contender(threading.Thread):
    """Queues for a turn, notes when it got one, and gives it back at once."""

    def __init__(self, log: list[str]):
        super().__init__(daemon=True)
        self.log, self.got = log, threading.Event()

    def run(self):
        turns.take()
        self.log.append("other thread's turn" if turns.holds() else "other thread gave up")
        self.got.set()
        turns.give_back()


def holding_a_turn_while(wait, log: list[str]) -> Contender:
    """This thread takes the only turn; another queues for it; this one then runs ``wait``
    (which may wait on the other's ``got``) and logs when it is over."""
    turns.take()
    assert turns.holds()
    other = Contender(log)
    other.start()
    assert not other.got.wait(0.2), "the other thread got a turn that was held"
    wait(other)
    log.append("wait over")
    assert turns.holds(), "after a wait, the thread has its turn again"
    turns.give_back()
    other.join(5)
    return other


def test_off_by_default_nothing_queues():
    turns.enable(0)
    turns.take()
    assert not turns.holds()
    log: list[str] = []
    other = Contender(log)
    other.start()
    assert other.got.wait(5)


def test_one_turn_is_held_until_it_is_given_back():
    log: list[str] = []
    holding_a_turn_while(lambda other: time.sleep(0.05), log)
    assert log == ["wait over", "other thread's turn"]


def test_a_wait_gives_the_turn_to_the_next_thread_and_queues_again():
    log: list[str] = []

    def wait(other):
        with turns.waiting():
            assert other.got.wait(5), "the turn was not given up during the wait"

    holding_a_turn_while(wait, log)
    assert log == ["other thread's turn", "wait over"]


def test_a_thread_without_a_turn_does_not_take_one_after_a_wait():
    turns.enable(1)
    with turns.waiting():
        pass
    assert not turns.holds()


def test_a_thread_queues_at_most_patience_seconds(monkeypatch):
    monkeypatch.setattr(turns, "PATIENCE", 0.1)
    turns.take()
    got, started = [], time.monotonic()

    def late():
        turns.take()  # the turn is held throughout: gives up queueing after PATIENCE
        got.append((turns.holds(), time.monotonic() - started))

    thread = threading.Thread(target=late)
    thread.start()
    thread.join(5)
    assert got and got[0][0] is False and 0.1 <= got[0][1] < 2


def test_a_model_call_gives_the_turn_up(scripted):
    log: list[str] = []
    others: list[Contender] = []

    def reply(messages, info):
        assert others[0].got.wait(5), "the turn was held through the model call"
        return "done"

    scripted.fn = reply
    gateway = Gateway(GatewayConfig(routes={"planner": "scripted/x"}, allow_network=False))

    def wait(other):
        others.append(other)
        assert gateway.complete("planner", [{"role": "user", "content": "hi"}]).text == "done"

    holding_a_turn_while(wait, log)
    assert log == ["other thread's turn", "wait over"]


def test_a_child_process_gives_the_turn_up(tmp_path):
    log: list[str] = []
    flag = tmp_path / "other-had-its-turn"

    def wait(other):
        # The child waits (up to 5 s) for a file the other thread writes once it has a turn.
        threading.Thread(target=lambda: other.got.wait(5) and flag.write_text("x"),
                         daemon=True).start()
        script = f"for i in $(seq 50); do [ -e '{flag}' ] && exit 0; sleep 0.1; done; exit 1"
        result = proc.run(["sh", "-c", script], cwd=tmp_path, timeout=10)
        assert result.returncode == 0, "the turn was held while the child ran"

    holding_a_turn_while(wait, log)
    assert log == ["other thread's turn", "wait over"]


def test_a_parallel_stage_gives_the_turn_up_while_its_jobs_run():
    log: list[str] = []

    def wait(other):
        jobs = {name: (lambda: other.got.wait(5)) for name in ("a", "b")}
        outcomes = run_parallel(jobs, timeout=10, limit=2)
        assert all(o.value is True for o in outcomes.values()), "the jobs waited in vain"

    holding_a_turn_while(wait, log)
    assert log == ["other thread's turn", "wait over"]


def queued() -> int:
    return len(turns._slots._cond._waiters)  # threads inside take(), blocked


def test_a_turn_is_handed_on_in_order_of_arrival():
    turns.take()
    order: list[int] = []
    threads = []
    for i in range(5):
        def contend(i=i):
            turns.take()
            order.append(i)
            turns.give_back()

        threads.append(threading.Thread(target=contend))
        threads[-1].start()
        deadline = time.monotonic() + 5
        while queued() < i + 1 and time.monotonic() < deadline:
            time.sleep(0.001)
    turns.give_back()
    for thread in threads:
        thread.join(5)
    assert order == [0, 1, 2, 3, 4]


@pytest.mark.django_db
def test_the_stage_task_gives_its_turn_back_even_when_it_fails(monkeypatch):
    from agents_app import tasks

    def broken(run_id, deadline):
        assert turns.holds(), "a stage runs holding a turn"
        raise RuntimeError("a bug in a stage")

    monkeypatch.setattr(tasks.engine, "advance_in_place", broken)
    with pytest.raises(RuntimeError):
        tasks.advance_run.run(12345)
    assert not turns.holds()
    other = Contender([])
    other.start()
    assert other.got.wait(5)


def test_a_worker_takes_its_turns_from_the_setting(settings, monkeypatch):
    from agents_app import tasks

    monkeypatch.setattr(turns, "PATIENCE", 0.1)
    settings.QUORUM_WORKER_TURNS = 2
    tasks._take_turns()
    got = []
    for _ in range(3):
        other = Contender([])
        other.run = lambda other=other: (turns.take(), got.append(turns.holds()))
        other.start()
        other.join(5)
    assert got == [True, True, False]  # two turns held (never given back): the third waits
    settings.QUORUM_WORKER_TURNS = 0
    tasks._take_turns()
    assert not turns.enabled()


def test_a_request_to_a_code_host_gives_the_turn_up():
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from reviews_app.hosting.base import RepoRef
    from reviews_app.hosting.http import Api

    others: list[Contender] = []

    class Slow(BaseHTTPRequestHandler):
        def do_GET(self):  # answers once the other thread has had its turn (or after 5 s)
            others[0].got.wait(5)
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api = Api(RepoRef("github", f"http://127.0.0.1:{server.server_port}", "o/r", timeout=10),
              name="GitHub", auth={})
    log: list[str] = []

    def wait(other):
        others.append(other)
        assert api.json("GET", "/repos/o/r", "the repository") == {"ok": True}

    try:
        holding_a_turn_while(wait, log)
    finally:
        api.close()
        server.shutdown()
    assert log == ["other thread's turn", "wait over"]


def test_waiting_for_analyzers_started_ahead_gives_the_turn_up(monkeypatch):
    from common.analyzers import runner

    others: list[Contender] = []

    def analyzers(inputs, timeout, off):
        others[0].got.wait(5)
        return "report"

    monkeypatch.setattr(runner, "_run", analyzers)
    log: list[str] = []

    def wait(other):
        others.append(other)
        ahead = runner.Ahead(("key",), [], 10, set())
        assert ahead.report() == "report"

    holding_a_turn_while(wait, log)
    assert log == ["other thread's turn", "wait over"]
