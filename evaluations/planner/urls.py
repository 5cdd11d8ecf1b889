"""The budget scheduler's API, included under ``/api/``."""

from django.urls import path

from evaluations.planner import api

app_name = "planner-api"

urlpatterns = [
    path("scenarios/<int:pk>/plan", api.PlansView.as_view(), name="plans"),
    path("scenarios/<int:pk>/plan/<int:plan_id>", api.PlanView.as_view(), name="plan"),
    path(
        "scenarios/<int:pk>/plan/<int:plan_id>/accept",
        api.PlanAcceptView.as_view(),
        name="accept",
    ),
]
