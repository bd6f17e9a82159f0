"""The memories page and its actions (under ``/reviews/``)."""

from django.urls import path

from agents_app import converters  # noqa: F401 - registers <id:...>

from . import views

urlpatterns = [
    path("memories/", views.memory_list, name="memory_list"),
    path("memories/<id:pk>/edit/", views.memory_edit, name="memory_edit"),
    path("memories/<id:pk>/approve/", views.memory_approve, name="memory_approve"),
    path("memories/<id:pk>/retire/", views.memory_retire, name="memory_retire"),
    path("memories/<id:pk>/restore/", views.memory_restore, name="memory_restore"),
]
