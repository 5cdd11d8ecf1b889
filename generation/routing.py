from django.urls import path

from generation.consumers import JobConsumer

websocket_urlpatterns = [
    path("ws/generation/jobs/<int:job_id>", JobConsumer.as_asgi(), name="ws-generation-job"),
]
