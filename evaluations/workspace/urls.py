"""The evaluation API, included under ``/api/evaluations/``."""

from django.urls import path

from evaluations.workspace import api

app_name = "workspace-api"

urlpatterns = [
    path("scenarios", api.QueueView.as_view(), name="queue"),
    path("scenarios/<int:pk>/next", api.NextTaskView.as_view(), name="next"),
    path("assignments/<int:pk>", api.AssignmentView.as_view(), name="assignment"),
    path("assignments/<int:pk>/submit", api.SubmitView.as_view(), name="submit"),
    path("assignments/<int:pk>/skip", api.SkipView.as_view(), name="skip"),
    path("judgments", api.JudgmentListView.as_view(), name="judgments"),
]
