from django.urls import path, re_path

from . import converters  # noqa: F401 - registers <id:...>
from .consumers import NoSuchChannel, RunConsumer
from .inbox_live import InboxConsumer

websocket_urlpatterns = [
    path("ws/runs/<id:pk>/", RunConsumer.as_asgi()),
    path("ws/inbox/", InboxConsumer.as_asgi()),
    # Anything else (a negative or oversized id, a mistyped path) is closed cleanly rather
    # than failing in the router.
    re_path(r"", NoSuchChannel.as_asgi()),
]
