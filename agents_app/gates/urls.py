from django.urls import path

from . import views

urlpatterns = [
    path("runs/<id:pk>/gates/", views.gate_panel, name="gate_panel"),
    path("runs/<id:pk>/gates/assign/", views.gate_assign, name="gate_assign"),
    path("runs/<id:pk>/gates/audit.csv", views.gate_audit_export, {"fmt": "csv"},
         name="gate_audit_csv"),
    path("runs/<id:pk>/gates/audit.json", views.gate_audit_export, {"fmt": "json"},
         name="gate_audit_json"),
]
