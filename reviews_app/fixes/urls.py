"""The review page's "Apply accepted fixes" action (under ``/reviews/``)."""

from django.urls import path

from agents_app import converters  # noqa: F401 - registers <id:...>

from . import views

urlpatterns = [
    path("<id:pk>/apply-fixes/", views.apply_fixes, name="review_apply_fixes"),
]
