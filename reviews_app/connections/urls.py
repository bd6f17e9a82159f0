from django.urls import path

from agents_app import converters  # noqa: F401 - registers <id:...>

from . import views, webhook

urlpatterns = [
    path("", views.connection_list, name="connection_list"),
    path("new/", views.connection_new, name="connection_new"),
    path("<id:pk>/", views.connection_detail, name="connection_detail"),
    path("<id:pk>/edit/", views.connection_edit, name="connection_edit"),
    path("<id:pk>/delete/", views.connection_delete, name="connection_delete"),
]

# Mounted under /webhooks/ (config/urls.py): no sign-in, no CSRF; the signature is the check.
webhook_urlpatterns = [
    path("<slug:provider>/<slug:hook_id>/", webhook.receive, name="webhook"),
]
