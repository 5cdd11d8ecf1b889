"""The analytics API, included under ``/api/``."""

from django.urls import path

from evaluations.analytics import api

app_name = "analytics-api"

urlpatterns = [
    path("scenarios/<int:pk>/analytics", api.AnalyticsView.as_view(), name="analytics"),
    path(
        "scenarios/<int:pk>/adaptive-tasks", api.AdaptiveTasksView.as_view(), name="adaptive-tasks"
    ),
    path("scenarios/<int:pk>/trust-gate", api.TrustGateView.as_view(), name="trust-gate"),
    path("teams/<slug:slug>/trust-gate", api.TeamTrustGateView.as_view(), name="team-trust-gate"),
    path(
        "scenarios/<int:pk>/analytics/<str:table>.csv",
        api.AnalyticsTableView.as_view(),
        name="table",
    ),
]
