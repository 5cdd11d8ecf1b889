from django.contrib import admin
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from rest_framework.routers import SimpleRouter

from evaluations.analytics.api import AdaptiveTasksView, AnalyticsTableView, AnalyticsView
from evaluations.api import (
    ImportJudgmentsView,
    InvitationListView,
    InvitationView,
    ScenarioExportView,
)
from evaluations.judge_api import JudgeViewSet, ScenarioJudgesView
from scenarios.api import JobToScenarioView

judge_router = SimpleRouter(trailing_slash=False)
judge_router.register("judges", JudgeViewSet, basename="judge")

handler404 = "evalplatform.api.exceptions.not_found"

urlpatterns = [
    path("admin/", admin.site.urls),
    # The apps' APIs; the core's last (the apps depend on the core, never the reverse).
    # The spec puts the conversion under generation; it belongs to scenarios (generation
    # never imports scenarios).
    path(
        "api/generation/jobs/<int:pk>/to-scenario",
        JobToScenarioView.as_view(),
        name="generation-to-scenario",
    ),
    path("api/generation/", include("generation.urls")),
    re_path(
        r"^api/scenarios/(?P<pk>[0-9]+)/export/(?P<fmt>csv|json)$",
        ScenarioExportView.as_view(),
        name="scenario-export",
    ),
    path(
        "api/scenarios/<int:pk>/import",
        ImportJudgmentsView.as_view(),
        name="scenario-import",
    ),
    path(
        "api/scenarios/<int:pk>/invitations",
        InvitationListView.as_view(),
        name="scenario-invitations",
    ),
    path(
        "api/scenarios/<int:pk>/invitations/<int:invitation_id>",
        InvitationView.as_view(),
        name="scenario-invitation",
    ),
    path("api/scenarios/<int:pk>/judges", ScenarioJudgesView.as_view(), name="scenario-judges"),
    path("api/scenarios/<int:pk>/analytics", AnalyticsView.as_view(), name="scenario-analytics"),
    path(
        "api/scenarios/<int:pk>/adaptive-tasks",
        AdaptiveTasksView.as_view(),
        name="scenario-adaptive-tasks",
    ),
    path(
        "api/scenarios/<int:pk>/analytics/<str:table>.csv",
        AnalyticsTableView.as_view(),
        name="scenario-analytics-table",
    ),
    path("api/", include(judge_router.urls)),
    path("api/", include("scenarios.urls")),
    path("api/evaluations/", include("evaluations.urls")),
    path("api/", include("evalplatform.api.urls")),
    path("", include("evaluations.urls_manager")),
    path("generation/", include("generation.page_urls")),
    path("evaluate/", include("evaluations.urls_pages")),
    path("generation", RedirectView.as_view(url="/generation/", permanent=False)),
    path("", include("evalplatform.web.urls")),
]
