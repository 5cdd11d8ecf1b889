from django.urls import include, path
from rest_framework.routers import SimpleRouter

from generation.api import BatchRegistryViewSet, EstimateView, JobViewSet, OutputViewSet

router = SimpleRouter(trailing_slash=False)
router.register("jobs", JobViewSet, basename="generationjob")
router.register("outputs", OutputViewSet, basename="generationoutput")

urlpatterns = [
    path("estimate", EstimateView.as_view(), name="generation-estimate"),
    path("batches", BatchRegistryViewSet.as_view({"get": "list"}), name="generation-batches"),
    path(
        "batches.csv",
        BatchRegistryViewSet.as_view({"get": "csv"}),
        name="generation-batches-csv",
    ),
    path("", include(router.urls)),
]
