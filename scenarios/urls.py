"""The scenarios API, included under ``/api/``: ``scenarios/…``, and the generation spec's
``generation/jobs/{id}/to-scenario`` (it belongs to scenarios: generation never imports
scenarios)."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from scenarios.api import JobToScenarioView, ScenarioViewSet

app_name = "scenarios-api"

router = SimpleRouter(trailing_slash=False)
router.register("scenarios", ScenarioViewSet, basename="scenario")

urlpatterns = [
    path(
        "generation/jobs/<int:pk>/to-scenario", JobToScenarioView.as_view(), name="job-to-scenario"
    ),
    path("", include(router.urls)),
]
