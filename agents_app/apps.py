from django.apps import AppConfig


class AgentsAppConfig(AppConfig):
    name = "agents_app"
    verbose_name = "Agent runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings

        from common import netguard

        from .llm.gateway import set_offline_latency
        from .patterns.registry import when_loaded

        set_offline_latency(settings.QUORUM_OFFLINE_LATENCY)
        # Under DEBUG and in the tests a provider or model call inside a transaction raises
        # (common/netguard.py); in production the check costs nothing.
        netguard.install(netguard.django_check if settings.QUORUM_NET_GUARD else None)
        netguard.ALLOW_REMOTE_HOSTS = settings.QUORUM_ALLOW_PROVIDER_REQUESTS
        # With a connection pool (PostgreSQL) a thread gives its connection back before each
        # wait on a model, a child process or helper threads (issue 37, common/dbpool.py).
        from common import dbpool, turns

        turns.before_wait(dbpool.release if dbpool.pooled() else None)
        # Each pattern's Django side is set up when its package loads (on first use: a
        # command that runs one pattern loads only that one).
        when_loaded(_set_up_django_side)
        from .forking import code_compare  # noqa: F401 - the compare page's code section
        from .gates import hooks as gate_hooks

        gate_hooks.install()  # teams' gates: rules, k of n, deadlines, the audit (issue 35)


def _set_up_django_side(pattern) -> None:
    from django.utils.module_loading import import_string

    from .engine import register_terminal_hook
    from .patterns.registry import part_of

    part_of(pattern, "persist")  # how its records are saved
    if pattern.on_terminal:
        register_terminal_hook(pattern.name, import_string(pattern.on_terminal))
