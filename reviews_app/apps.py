from django.apps import AppConfig


class ReviewsAppConfig(AppConfig):
    name = "reviews_app"
    verbose_name = "Code reviews"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agents_app.patterns import register_pattern
        from agents_app.views import register_live_renderer

        from . import records  # noqa: F401 - registers the persisters
        from .pipeline import offline_review
        from .pipeline.pattern import CodeReview
        from .views import render_live_update

        register_pattern(CodeReview())
        offline_review.register()
        register_live_renderer(CodeReview.name, render_live_update)
