"""WebSocket routes of every app, gathered in one place (apps append theirs as they arrive)."""

from django.urls import URLPattern

websocket_urlpatterns: list[URLPattern] = []
