"""The analytics pages of a scenario, included at the site's root."""

from django.urls import path

from evaluations.analytics import views

app_name = "analytics"

urlpatterns = [
    path("scenarios/<int:scenario_id>/analytics", views.analytics_page, name="page"),
    path("scenarios/<int:scenario_id>/adaptive-tasks", views.adaptive_tasks, name="adaptive-tasks"),
    path("scenarios/<int:scenario_id>/trust-gate", views.trust_gate, name="trust-gate"),
    path("teams/<slug:team>/trust-gate", views.team_trust_gate, name="team-trust-gate"),
]
