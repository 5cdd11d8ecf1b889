"""The quality-control forms of the scenario page, included at the site's root before the
manager's pages (its ``scenarios/<id>/<action>`` would take these addresses)."""

from django.urls import path

from evaluations.quality import views

app_name = "quality"

urlpatterns = [
    path("scenarios/<int:scenario_id>/assignees", views.assignees, name="assignees"),
    path("scenarios/<int:scenario_id>/gold", views.gold, name="gold"),
    path("scenarios/<int:scenario_id>/attention", views.attention_checks, name="attention"),
    path("scenarios/<int:scenario_id>/excluded/<str:user>", views.excluded, name="excluded"),
]
