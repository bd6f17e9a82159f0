"""The review rules page and its actions (under ``/reviews/``)."""

from django.urls import path

from agents_app import converters  # noqa: F401 - registers <id:...>

from . import views

urlpatterns = [
    path("rules/", views.rule_list, name="review_rules"),
    path("rules/new/", views.rule_new, name="rule_new"),
    path("rules/suggest/", views.rule_suggest, name="rule_suggest"),
    path("rules/<id:pk>/edit/", views.rule_edit, name="rule_edit"),
    path("rules/<id:pk>/approve/", views.rule_approve, name="rule_approve"),
    path("rules/<id:pk>/retire/", views.rule_retire, name="rule_retire"),
    path("rules/<id:pk>/restore/", views.rule_restore, name="rule_restore"),
    path("rules/<id:pk>/delete/", views.rule_delete, name="rule_delete"),
]
