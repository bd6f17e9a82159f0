from django.urls import path

from .consumers import RunConsumer

websocket_urlpatterns = [path("ws/runs/<int:pk>/", RunConsumer.as_asgi())]
