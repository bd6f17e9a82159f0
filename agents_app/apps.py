from django.apps import AppConfig


class AgentsAppConfig(AppConfig):
    name = "agents_app"
    verbose_name = "Agent runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from importlib import import_module

        from django.conf import settings
        from django.utils.module_loading import import_string

        from .engine import register_terminal_hook
        from .llm.gateway import set_offline_latency
        from .patterns import PATTERNS

        set_offline_latency(settings.QUORUM_OFFLINE_LATENCY)
        # Loading the registry teaches the offline model every pattern's replies.
        for pattern in PATTERNS.values():
            # A package's Django side that must load with the app: how its records are saved.
            try:
                import_module(f"{pattern.package}.persist")
            except ModuleNotFoundError as exc:
                if exc.name != f"{pattern.package}.persist":
                    raise
            if pattern.on_terminal:
                register_terminal_hook(pattern.name, import_string(pattern.on_terminal))
