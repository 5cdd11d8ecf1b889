"""Live-event routes of every app, gathered in one place: the plain WebSocket's URL patterns,
and the topics a Socket.IO client may ``subscribe`` to (``{"job": <id>}``)."""

from django.urls import URLPattern

from evalplatform.live.watch import Topic
from generation.consumers import JOB_TOPIC
from generation.routing import websocket_urlpatterns as generation_routes

websocket_urlpatterns: list[URLPattern] = [*generation_routes]

socketio_topics: dict[str, Topic] = {"job": JOB_TOPIC}
