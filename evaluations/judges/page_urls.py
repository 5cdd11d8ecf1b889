"""The scenario page's LLM judge forms, included at the site's root."""

from django.urls import path

from evaluations.judges import views

app_name = "judges"

urlpatterns = [
    path("scenarios/<int:scenario_id>/judges", views.judge_add, name="add"),
    path("judges/<int:judge_id>", views.judge_page, name="page"),
    path("judges/<int:judge_id>/estimate", views.judge_estimate, name="estimate"),
    path("judges/<int:judge_id>/trust-opt-in", views.judge_trust_opt_in, name="trust-opt-in"),
    path("judges/<int:judge_id>/<str:action>", views.judge_action, name="action"),
]
