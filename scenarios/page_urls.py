"""The scenarios app's page, included under ``/generation/`` before generation's pages (their
``jobs/<id>/<action>`` would take it): the job page's "Convert to scenario" dialog."""

from django.urls import path

from scenarios import views

app_name = "scenarios"

urlpatterns = [
    path("jobs/<int:job_id>/to-scenario", views.from_job, name="from-job"),
    path("jobs/<int:job_id>/to-scenario/preview", views.preview_job, name="preview-job"),
]
