from django.urls import path

from generation.consumers import JobConsumer

# The pages name this path in their data-socket attributes (templates/generation/).
websocket_urlpatterns = [
    path("ws/generation/jobs/<int:job_id>", JobConsumer.as_asgi(), name="ws-generation-job"),
]
