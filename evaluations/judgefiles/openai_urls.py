"""The OpenAI Files + Batches API of judge files, included at ``/v1/``."""

from django.urls import path

from evaluations.judgefiles import openai_api as views

app_name = "openai-api"

urlpatterns = [
    path("files", views.FilesView.as_view(), name="files"),
    path("files/<str:file_id>", views.FileView.as_view(), name="file"),
    path("files/<str:file_id>/content", views.FileContentView.as_view(), name="file-content"),
    path("batches", views.BatchesView.as_view(), name="batches"),
    path("batches/<str:batch_id>", views.BatchView.as_view(), name="batch"),
    path("batches/<str:batch_id>/cancel", views.BatchCancelView.as_view(), name="batch-cancel"),
]
