"""The quality-control API, included under ``/api/``."""

from django.urls import path

from evaluations.quality import api

app_name = "quality-api"

urlpatterns = [
    path("scenarios/<int:pk>/assignees", api.AssigneesView.as_view(), name="assignees"),
    path("scenarios/<int:pk>/gold", api.GoldView.as_view(), name="gold"),
    path("scenarios/<int:pk>/attention", api.AttentionView.as_view(), name="attention"),
    path(
        "scenarios/<int:pk>/attention/<int:task>",
        api.AttentionCheckView.as_view(),
        name="attention-check",
    ),
    path("scenarios/<int:pk>/quality", api.QualityView.as_view(), name="quality"),
    path("scenarios/<int:pk>/excluded/<str:user>", api.ExcludedView.as_view(), name="excluded"),
]
