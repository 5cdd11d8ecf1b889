from django.urls import path

from evaluations import api

urlpatterns = [
    path("scenarios", api.QueueView.as_view(), name="evaluation-queue"),
    path("scenarios/<int:pk>/next", api.NextTaskView.as_view(), name="evaluation-next"),
    path("assignments/<int:pk>", api.AssignmentView.as_view(), name="evaluation-assignment"),
    path("assignments/<int:pk>/submit", api.SubmitView.as_view(), name="evaluation-submit"),
    path("assignments/<int:pk>/skip", api.SkipView.as_view(), name="evaluation-skip"),
    path("judgments", api.JudgmentListView.as_view(), name="evaluation-judgments"),
]
