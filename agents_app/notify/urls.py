from django.urls import path

from . import views

urlpatterns: list = [
    path("settings/notifications/", views.notification_settings, name="notification_settings"),
    path("settings/notifications/choices/", views.save_preferences,
         name="notification_preferences"),
    path("settings/notifications/endpoints/new/", views.endpoint_new,
         name="notification_endpoint_new"),
    path("settings/notifications/endpoints/<id:pk>/test/", views.endpoint_test,
         name="notification_endpoint_test"),
    path("settings/notifications/endpoints/<id:pk>/delete/", views.endpoint_delete,
         name="notification_endpoint_delete"),
    path("inbox/link/<str:token>/", views.decision_link, name="decision_link"),
]
