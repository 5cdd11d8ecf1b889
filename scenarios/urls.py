from django.urls import include, path
from rest_framework.routers import SimpleRouter

from scenarios.api import ScenarioViewSet

router = SimpleRouter(trailing_slash=False)
router.register("scenarios", ScenarioViewSet, basename="scenario")

urlpatterns = [path("", include(router.urls))]
