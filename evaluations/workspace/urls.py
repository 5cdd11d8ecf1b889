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
    path("assignments/<int:pk>/flag", api.FlagView.as_view(), name="flag"),
    path("scenarios/<int:pk>/mine", api.MineView.as_view(), name="mine"),
    path("scenarios/<int:pk>/flags", api.FlagListView.as_view(), name="flags"),
    path("judgments", api.JudgmentListView.as_view(), name="judgments"),
    path("judgments/<int:pk>/revise", api.ReviseView.as_view(), name="revise"),
]
