"""Anthropic's Message Batches API of judge files, included at ``/v1/messages/``."""

from django.urls import path

from evaluations.judgefiles import anthropic_api as views

app_name = "anthropic-api"

urlpatterns = [
    path("batches", views.MessageBatchesView.as_view(), name="batches"),
    path("batches/<str:batch_id>", views.MessageBatchView.as_view(), name="batch"),
    path(
        "batches/<str:batch_id>/results",
        views.MessageBatchResultsView.as_view(),
        name="batch-results",
    ),
    path(
        "batches/<str:batch_id>/cancel",
        views.MessageBatchCancelView.as_view(),
        name="batch-cancel",
    ),
]
