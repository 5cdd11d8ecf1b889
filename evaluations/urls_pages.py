from django.urls import path

from evaluations import views

urlpatterns = [
    path("", views.queue, name="evaluation-queue"),
    path("scenarios/<int:scenario_id>", views.scenario_next, name="evaluation-next"),
    path("tasks/<int:assignment_id>", views.task, name="evaluation-task"),
    path("tasks/<int:assignment_id>/skip", views.skip, name="evaluation-skip"),
]
