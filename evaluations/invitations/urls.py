"""The invitations API, included under ``/api/``."""

from django.urls import path

from evaluations.invitations import api

app_name = "invitations-api"

urlpatterns = [
    path("scenarios/<int:pk>/invitations", api.InvitationListView.as_view(), name="list"),
    path(
        "scenarios/<int:pk>/invitations/<int:invitation_id>",
        api.InvitationView.as_view(),
        name="detail",
    ),
]
