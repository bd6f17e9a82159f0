"""Admin for connections and webhook deliveries (imported by reviews_app/admin.py). Staff see
every user's connections here; the sealed token and secret are never shown (only their
hints), and where they come from cannot be changed here: the app's form checks that."""

from django.contrib import admin

from agents_app.admin import RecordAdmin
from reviews_app.models import Connection, WebhookDelivery


@admin.register(Connection)
class ConnectionAdmin(admin.ModelAdmin):
    list_display = ("repository", "provider", "api_url", "owner", "publish_policy", "active",
                    "created_at")
    list_filter = ("provider", "publish_policy", "active")
    search_fields = ("repository", "owner__username")
    exclude = ("token_sealed", "secret_sealed")
    readonly_fields = ("owner", "provider", "repository", "api_url", "hook_id", "token_env",
                       "token_hint", "secret_env", "secret_hint", "created_at", "updated_at")

    def has_add_permission(self, request):
        return False  # made in the app, where the form checks the host and the secrets


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(RecordAdmin):
    list_display = ("delivery_id", "connection", "event", "number", "status", "received_at")
    list_filter = ("status", "event")
    search_fields = ("delivery_id",)
    readonly_fields = ("connection", "pull_request")
