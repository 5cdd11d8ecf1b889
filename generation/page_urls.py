from django.urls import path

from generation import views

urlpatterns = [
    path("", views.hub, name="generation-hub"),
    path("new", views.wizard, name="generation-new"),
    path("new/estimate", views.wizard_estimate, name="generation-new-estimate"),
    path("jobs/<int:job_id>", views.job_detail, name="generation-job"),
    path("jobs/<int:job_id>/outputs", views.job_outputs, name="generation-job-outputs"),
    path("jobs/<int:job_id>/statistics", views.job_statistics, name="generation-job-statistics"),
    path(
        "jobs/<int:job_id>/consistency",
        views.job_consistency,
        name="generation-job-consistency",
    ),
    path(
        "jobs/<int:job_id>/<str:action>",
        views.job_action,
        name="generation-job-action",
    ),
]
