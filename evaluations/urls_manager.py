from django.urls import path

from evaluations import invitation_views, judge_views, manager_views
from evaluations.analytics import views as analytics_views
from scenarios import views as scenario_views

urlpatterns = [
    path("scenarios/", manager_views.scenario_list, name="scenario-list"),
    path("scenarios/new", manager_views.scenario_new, name="scenario-new"),
    path(
        "scenarios/<int:scenario_id>/analytics",
        analytics_views.analytics_page,
        name="scenario-analytics-page",
    ),
    path(
        "scenarios/<int:scenario_id>/adaptive-tasks",
        analytics_views.adaptive_tasks,
        name="scenario-adaptive-tasks-page",
    ),
    path("scenarios/<int:scenario_id>", manager_views.scenario_page, name="scenario-page"),
    path("scenarios/<int:scenario_id>/edit", manager_views.scenario_edit, name="scenario-edit"),
    path(
        "scenarios/<int:scenario_id>/invite",
        invitation_views.invite,
        name="scenario-invite",
    ),
    path(
        "scenarios/<int:scenario_id>/invitations/<int:invitation_id>/withdraw",
        invitation_views.withdraw,
        name="scenario-invitation-withdraw",
    ),
    path("invitations/<str:token>", invitation_views.invitation, name="invitation"),
    path("scenarios/<int:scenario_id>/judges", judge_views.judge_add, name="judge-add"),
    path("judges/<int:judge_id>/estimate", judge_views.judge_estimate, name="judge-estimate"),
    path("judges/<int:judge_id>/<str:action>", judge_views.judge_action, name="judge-action"),
    path(
        "scenarios/<int:scenario_id>/<str:action>",
        manager_views.scenario_action,
        name="scenario-action",
    ),
    path(
        "generation/jobs/<int:job_id>/to-scenario",
        scenario_views.from_job,
        name="scenario-from-job",
    ),
]
