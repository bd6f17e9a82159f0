from django.urls import path

from ... import converters  # noqa: F401 - registers <id:...>
from . import views

urlpatterns = [
    path("runs/<id:pk>/vote/", views.vote_decision, name="vote_decision"),
]
