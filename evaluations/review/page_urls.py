"""The review page of a scenario, included at the site's root before the manager's pages
(its ``scenarios/<id>/<action>`` would take ``scenarios/<id>/review``)."""

from django.urls import path

from evaluations.review import views

app_name = "review"

urlpatterns = [
    path("scenarios/<int:scenario_id>/review", views.review_page, name="page"),
    path(
        "scenarios/<int:scenario_id>/tasks/<int:task_id>/adjudication",
        views.adjudicate,
        name="adjudicate",
    ),
    path(
        "scenarios/<int:scenario_id>/tasks/<int:task_id>/adjudication/delete",
        views.adjudication_delete,
        name="adjudication-delete",
    ),
    path("scenarios/<int:scenario_id>/tasks/<int:task_id>/gold", views.gold, name="gold"),
    path(
        "scenarios/<int:scenario_id>/tasks/<int:task_id>/attention-check",
        views.attention_check,
        name="attention-check",
    ),
]
