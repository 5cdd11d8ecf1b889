"""The LLM judge API, included under ``/api/``: ``scenarios/{id}/judges`` and ``judges/…``."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from evaluations.judges.api import JudgeViewSet, ScenarioJudgesView

app_name = "judges-api"

router = SimpleRouter(trailing_slash=False)
router.register("judges", JudgeViewSet, basename="judge")

urlpatterns = [
    path("scenarios/<int:pk>/judges", ScenarioJudgesView.as_view(), name="scenario-judges"),
    path("", include(router.urls)),
]
