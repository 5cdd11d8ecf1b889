"""The platform's judge-files API, included under ``/api/``."""

from django.urls import path

from evaluations.judgefiles import api

app_name = "judge-files-api"

urlpatterns = [
    path("judge-files/estimate", api.EstimateView.as_view(), name="estimate"),
    path(
        "judge-files/<str:batch_id>/verdicts.csv",
        api.VerdictsView.as_view(),
        {"fmt": "csv"},
        name="verdicts-csv",
    ),
    path("judge-files/<str:batch_id>/verdicts", api.VerdictsView.as_view(), name="verdicts"),
    path("judge-files/<str:batch_id>/resubmit", api.ResubmitView.as_view(), name="resubmit"),
    path("judge-files/<str:batch_id>/resume", api.ResumeView.as_view(), name="resume"),
    path(
        "judge-files/<str:batch_id>/compare/<str:other_id>.csv",
        api.CompareView.as_view(),
        {"fmt": "csv"},
        name="compare-csv",
    ),
    path(
        "judge-files/<str:batch_id>/compare/<str:other_id>",
        api.CompareView.as_view(),
        name="compare",
    ),
]
