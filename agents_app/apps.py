from django.apps import AppConfig


class AgentsAppConfig(AppConfig):
    name = "agents_app"
    verbose_name = "Agent runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings

        from .llm import offline_change, offline_patterns
        from .llm.gateway import set_offline_latency

        set_offline_latency(settings.QUORUM_OFFLINE_LATENCY)
        offline_change.register()
        offline_patterns.register()

        from .change_views import render_live_update
        from .patterns.plan_execute_review import PlanExecuteReview
        from .views import register_live_renderer

        register_live_renderer(PlanExecuteReview.name, render_live_update)

        from .changes import close_after_end
        from .engine import register_terminal_hook

        register_terminal_hook(PlanExecuteReview.name, close_after_end)
