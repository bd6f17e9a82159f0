from django.urls import path

from . import views

urlpatterns = [
    path("runs/<id:pk>/plan/", views.plan_decision, name="plan_decision"),
]
