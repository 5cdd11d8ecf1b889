"""The evaluator workspace's pages, included under ``/evaluate/``."""

from django.urls import path

from evaluations.workspace import views

app_name = "workspace"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("scenarios/<int:scenario_id>", views.scenario_next, name="next"),
    path("tasks/<int:assignment_id>", views.task, name="task"),
    path("tasks/<int:assignment_id>/skip", views.skip, name="skip"),
    path("tasks/<int:assignment_id>/flag", views.flag, name="flag"),
    path("judgments/<int:judgment_id>", views.revise, name="revise"),
]
