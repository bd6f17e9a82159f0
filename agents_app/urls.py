from django.urls import path

from . import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("runs/new/", views.start_run, name="start_run"),
    path("runs/<int:pk>/", views.run_detail, name="run_detail"),
    path("runs/<int:pk>/plan/", views.plan_decision, name="plan_decision"),
    path("runs/<int:pk>/cancel/", views.cancel_run, name="cancel_run"),
]
