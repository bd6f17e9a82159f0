from django.apps import AppConfig


class AgentsAppConfig(AppConfig):
    name = "agents_app"
    verbose_name = "Agent runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings
        from django.utils.module_loading import import_string

        from .engine import register_terminal_hook
        from .llm.gateway import set_offline_latency
        from .patterns import PATTERNS
        from .patterns.registry import part_of

        set_offline_latency(settings.QUORUM_OFFLINE_LATENCY)
        # Loading the registry teaches the offline model every pattern's replies.
        for pattern in PATTERNS.values():
            # A package's Django side that must load with the app: how its records are saved.
            part_of(pattern, "persist")
            if pattern.on_terminal:
                register_terminal_hook(pattern.name, import_string(pattern.on_terminal))
