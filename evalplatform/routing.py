"""WebSocket routes of every app, gathered in one place."""

from django.urls import URLPattern

from generation.routing import websocket_urlpatterns as generation_routes

websocket_urlpatterns: list[URLPattern] = [*generation_routes]
