from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from reviews_app.connections.urls import webhook_urlpatterns

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("reviews/", include("reviews_app.urls")),
    path("connections/", include("reviews_app.connections.urls")),
    path("webhooks/", include(webhook_urlpatterns)),
    path("", include("agents_app.urls")),
]
