from django.urls import path

from agents_app import converters  # noqa: F401 - registers <id:...>

from . import app_views, github_app, views, webhook

urlpatterns = [
    path("", views.connection_list, name="connection_list"),
    path("apps/new/", app_views.app_new, name="github_app_new"),
    path("apps/<id:pk>/", app_views.app_detail, name="github_app_detail"),
    path("apps/<id:pk>/edit/", app_views.app_edit, name="github_app_edit"),
    path("apps/<id:pk>/delete/", app_views.app_delete, name="github_app_delete"),
    path("new/", views.connection_new, name="connection_new"),
    path("<id:pk>/", views.connection_detail, name="connection_detail"),
    path("<id:pk>/edit/", views.connection_edit, name="connection_edit"),
    path("<id:pk>/delete/", views.connection_delete, name="connection_delete"),
]

# Mounted under /webhooks/ (config/urls.py): no sign-in, no CSRF; the signature is the check.
webhook_urlpatterns = [
    path("github-app/<slug:hook_id>/", github_app.receive, name="github_app_webhook"),
    path("<slug:provider>/<slug:hook_id>/", webhook.receive, name="webhook"),
]
