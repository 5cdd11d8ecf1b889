"""The scheduler's pages, included at the site's root."""

from django.urls import path

from evaluations.planner import views

app_name = "planner"

urlpatterns = [
    path("scenarios/<int:scenario_id>/plan", views.plan_page, name="page"),
    path("scenarios/<int:scenario_id>/plan/<int:plan_id>", views.plan_detail, name="plan"),
    path(
        "scenarios/<int:scenario_id>/plan/<int:plan_id>/accept",
        views.plan_accept,
        name="accept",
    ),
]
