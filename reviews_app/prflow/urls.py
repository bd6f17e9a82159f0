"""The review page's "Publish now" / "Publish again" button (under ``/reviews/``)."""

from django.urls import path

from agents_app import converters  # noqa: F401 - registers <id:...>

from .publishing import views as publishing_views

urlpatterns = [
    path("<id:pk>/publish/", publishing_views.publish_now, name="publish_review"),
]
