from django.urls import path

from . import views

urlpatterns = [
    path("runs/<id:pk>/tool/", views.tool_decision, name="tool_decision"),
]
