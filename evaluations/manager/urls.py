"""The scenario manager's API, included under ``/api/``: exports and imports of judgments."""

from django.urls import path, re_path

from evaluations.manager import api

app_name = "manager-api"

urlpatterns = [
    re_path(
        r"^scenarios/(?P<pk>[0-9]+)/export/(?P<fmt>csv|json)$",
        api.ScenarioExportView.as_view(),
        name="export",
    ),
    path("scenarios/<int:pk>/import", api.ImportJudgmentsView.as_view(), name="import"),
]
