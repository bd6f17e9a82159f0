from django.apps import AppConfig


class ReviewsAppConfig(AppConfig):
    name = "reviews_app"
    verbose_name = "Code reviews"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import records  # noqa: F401 - registers the persisters
        from .pipeline import offline_review

        offline_review.register()
        from . import compare  # noqa: F401 - the compare page's findings section
