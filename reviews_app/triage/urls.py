"""Triage on the review page (under ``/reviews/``)."""

from django.urls import path

from agents_app import converters  # noqa: F401 - registers <id:...>

from . import views

urlpatterns = [
    path("<id:pk>/findings/<str:key>/", views.finding_decision, name="finding_decision"),
    path("<id:pk>/accept-all/", views.accept_all, name="accept_all"),
    path("<id:pk>/settle/", views.settle_rest, name="settle_rest"),
    path("<id:pk>/verdict/", views.verdict_decision, name="verdict_decision"),
    path("<id:pk>/reopen/", views.reopen_triage, name="reopen_triage"),
]
