"""The review API, included under ``/api/``."""

from django.urls import path

from evaluations.review import api

app_name = "review-api"

urlpatterns = [
    path("scenarios/<int:pk>/review", api.ReviewView.as_view(), name="review"),
    path(
        "scenarios/<int:pk>/tasks/<int:task_id>/adjudication",
        api.AdjudicationView.as_view(),
        name="adjudication",
    ),
]
