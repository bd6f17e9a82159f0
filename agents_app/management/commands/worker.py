"""Celery workers, one per core, forked from one process that has imported everything.

    python manage.py worker [--processes N] [--concurrency C] [--loglevel INFO] [--name worker]
                            [--hostname HOST]

Each child is ``celery -A config worker --pool threads --concurrency C -n {name}{i}@{host}``
(``host``: ``--hostname``, else ``QUORUM_WORKER_HOSTNAME``, else ``%h``, the machine's name).
Leases carry the node name and a worker that starts frees the leases an earlier incarnation of
its own node name held, so two worker machines must never share one: give each its own
``--hostname`` where their machine names could be equal (containers given one hostname). The
parent imports Django, Celery, the tasks, every pattern and (when a provider's model is
configured) LiteLLM, moves it all out of the collector's sight (``gc.freeze``) and forks: the
children share those pages instead of each holding its own copy, and a child that dies is
forked again from the warm parent (common/forks.py) instead of importing for seconds. Measured
in docs/BENCHMARKS.md ("Quorum vs LangGraph")."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import re
import threading

from django import forms
from django.db import connections

from agents_app.cli import CheckedCommand, form_type, option_or_env, require_migrated
from agents_app.option_fields import check_pattern_settings
from common import dbpool
from common.forks import Forks

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
PROCESSES = forms.IntegerField(min_value=1, max_value=64)
CONCURRENCY = forms.IntegerField(min_value=1, max_value=1000)
NODE_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")
HOSTNAME_MESSAGE = ("it takes 1 to 64 letters (a-z, A-Z), digits, dots, hyphens and "
                    "underscores, starting with a letter or digit")
HOSTNAME = forms.RegexField(regex=r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z",
                            error_messages={"invalid": HOSTNAME_MESSAGE[0].upper()
                                            + HOSTNAME_MESSAGE[1:] + "."})


def default_processes() -> int:
    """One per core, at most four."""
    return max(1, min(os.cpu_count() or 1, 4))


# What a child would otherwise import on its first task or first model call, found by comparing
# a child's sys.modules after a batch of runs with its parent's (docs/BENCHMARKS.md): imported
# before the fork, each is one shared copy instead of one per child. A name an installed
# version lacks is skipped; nothing breaks, that module is just not shared.
WORKER_MODULES = (
    "celery.bin.celery", "celery.apps.worker", "celery.worker.consumer.consumer",
    "celery.worker.request", "celery.worker.strategy", "celery.worker.control",
    "celery.worker.pidbox", "celery.worker.autoscale", "celery.worker.components",
    "celery.worker.loops", "celery.concurrency.thread", "celery.contrib.django.task",
    "celery.events.dispatcher", "celery.events.receiver", "celery.backends.base",
    "celery.app.control", "celery.app.trace", "celery.app.amqp", "celery.app.events",
    "celery.app.log", "celery.app.routes", "celery.worker.consumer.delayed_delivery",
    "billiard.pool", "kombu.asynchronous.hub", "kombu.pidbox",
    "kombu.mixins", "channels_redis.core", "channels_redis.pubsub", "xml.dom.minidom",
    "pygments.lexers.python", "pygments.formatters.terminal256",
)
PROVIDER_MODULES = (
    "openai.resources", "httpcore", "h11", "h2.connection", "jiter", "litellm._service_logger",
    "litellm.integrations.prometheus_services", "litellm.llms.fal_ai.cost_calculator",
    "litellm.llms.edenai.chat.transformation", "litellm.llms.openai.chat.gpt_audio_transformation",
    "litellm.llms.openai_like.dynamic_config", "litellm.proxy._types",
    "litellm.llms.vertex_ai.vertex_ai_partner_models.anthropic.transformation",
    "litellm.llms.fal_ai.chat.transformation", "litellm.proxy.openai_files_endpoints.common_utils",
)


def preload(names: tuple[str, ...]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def warm_up() -> None:
    """Import what every child needs, then leave the parent holding nothing a fork could
    share half-used: no database connection, no thread but this one."""
    from config.celery import app

    app.loader.import_default_modules()  # the tasks modules (autodiscovery)
    from agents_app.engine.stages import offline_only
    from agents_app.llm.runtime import litellm as litellm_runtime
    from agents_app.patterns.registry import load_all

    load_all()
    preload(WORKER_MODULES)
    if not offline_only():
        litellm_runtime()
        preload(PROVIDER_MODULES)
    connections.close_all()
    dbpool.close_pools()  # a pool's connections and threads would be half-copied into a child
    extra = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    if extra:  # a library started a thread at import: it would not exist in the children
        raise RuntimeError(f"threads running before the fork: {', '.join(extra)}")
    gc.collect()
    gc.freeze()



def node_name(text: str) -> str:
    if not NODE_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError("it takes 1 to 64 letters (a-z, A-Z), digits and "
                                         "underscores")
    return text


def hostname(text: str) -> str:
    try:
        return HOSTNAME.clean(text)
    except forms.ValidationError:
        raise argparse.ArgumentTypeError(HOSTNAME_MESSAGE) from None


def node_host(opts) -> str:
    """The host part of the node names: the option, else ``QUORUM_WORKER_HOSTNAME``, else
    ``%h`` (Celery puts the machine's hostname there)."""
    return option_or_env(opts.get("hostname"), "QUORUM_WORKER_HOSTNAME", HOSTNAME, "%h")


def add_shape_options(parser) -> None:
    """--processes and --concurrency, for this command and ``make dev``'s."""
    parser.add_argument("--processes", type=form_type(PROCESSES, "a whole number"),
                        help="worker processes (default: QUORUM_WORKER_PROCESSES, or one per "
                             "core, at most four)")
    parser.add_argument("--concurrency", type=form_type(CONCURRENCY, "a whole number"),
                        help="threads per worker process (default: QUORUM_WORKER_CONCURRENCY "
                             "or 100)")


def shape(opts) -> tuple[int, int]:
    """(processes, concurrency): the options, else their settings, else the defaults."""
    return (option_or_env(opts["processes"], "QUORUM_WORKER_PROCESSES", PROCESSES,
                          default_processes()),
            option_or_env(opts["concurrency"], "QUORUM_WORKER_CONCURRENCY", CONCURRENCY, 100))


def celery_argv(name: str, slot: int, concurrency: int, loglevel: str,
                extra: list[str], host: str = "%h") -> list[str]:
    return ["worker", "--pool", "threads", "--concurrency", str(concurrency),
            "--loglevel", loglevel, "-n", f"{name}{slot}@{host}", *extra]


class Command(CheckedCommand):
    help = ("Celery workers (thread pool), one process per core, forked from one process that "
            "has imported everything they share.")
    requires_system_checks: list[str] = []
    needs_database = False  # checked in handle, after the options

    def add_arguments(self, parser):
        add_shape_options(parser)
        parser.add_argument("--loglevel", type=str.upper, choices=LOG_LEVELS, default="INFO")
        parser.add_argument("--name", default="worker", type=node_name,
                            help="node names are NAME1@host, NAME2@host, …")
        parser.add_argument("--hostname", type=hostname,
                            help="the host part of the node names (default: "
                                 "QUORUM_WORKER_HOSTNAME, or this machine's hostname); each "
                                 "worker machine needs its own")
        parser.add_argument("celery_args", nargs="*", metavar="CELERY_OPTION",
                            help="more options for each `celery worker`, after --")

    def handle(self, *args, **opts):
        processes, concurrency = shape(opts)
        host = node_host(opts)
        check_pattern_settings()  # before the database: a bad setting is said first
        require_migrated()
        warm_up()
        from config.celery import app

        def child(slot: int) -> int:
            app.worker_main(celery_argv(opts["name"], slot, concurrency, opts["loglevel"],
                                        opts["celery_args"], host))
            return 0

        raise SystemExit(Forks(child, processes, name=opts["name"]).run())
