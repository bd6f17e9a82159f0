"""Start Celery workers in about half a second: a fork server for the fault scripts.

A worker's start is mostly imports (Django, the app, LiteLLM: several seconds of CPU on a
small machine). The fault scripts restart the worker after every SIGKILL, dozens of times, so
this process does the imports once, then forks one child per worker incarnation on request.
Each child starts a session of its own (``kill -9 -<pid>`` takes it and its git, ruff or
bandit children, like ``tests/stack.Proc.kill``), gets a fresh boot id (as every fork does:
``engine.leases`` renews it after a fork; leases carry it, see
``engine.recover_after_restart``), and runs
``celery worker`` with the given arguments through ``app.worker_main``: the same Celery
worker as ``celery -A config worker ...``, same pool, same signals.

Protocol on stdin/stdout, one line each: ``<log path>\t<json argv>`` → ``<pid>``. On end of
input the server kills every child it started and exits, so nothing outlives the script.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _child(log_path: str, argv: list[str]) -> None:
    os.setsid()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    from config.celery import app

    try:
        app.worker_main(["worker", *argv])
    finally:
        os._exit(0)


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from config.celery import app

    app.loader.import_default_modules()
    children: list[int] = []
    print("ready", flush=True)
    for line in sys.stdin:
        while True:  # reap the children that were killed
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        log_path, _, argv = line.rstrip("\n").partition("\t")
        pid = os.fork()
        if pid == 0:
            _child(log_path, json.loads(argv))
        children.append(pid)
        print(pid, flush=True)
    for pid in children:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


if __name__ == "__main__":
    main()
