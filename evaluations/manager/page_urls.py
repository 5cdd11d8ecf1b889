"""The scenario manager's pages, included at the site's root after the other sub-packages'
pages: ``scenarios/<id>/<action>`` would take their ``scenarios/<id>/…`` addresses."""

from django.urls import path

from evaluations.manager import views

app_name = "manager"

urlpatterns = [
    path("scenarios/", views.scenario_list, name="scenario-list"),
    path("scenarios/new", views.scenario_new, name="scenario-new"),
    path("scenarios/new/preview", views.scenario_new_preview, name="scenario-new-preview"),
    path("scenarios/<int:scenario_id>", views.scenario_page, name="scenario-page"),
    path("scenarios/<int:scenario_id>/edit", views.scenario_edit, name="scenario-edit"),
    path("scenarios/<int:scenario_id>/<str:action>", views.scenario_action, name="scenario-action"),
]
