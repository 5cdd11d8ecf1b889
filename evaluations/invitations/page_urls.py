"""The invitation pages, included at the site's root: the manager's forms on the scenario
page, and the link an invited person opens."""

from django.urls import path

from evaluations.invitations import views

app_name = "invitations"

urlpatterns = [
    path("scenarios/<int:scenario_id>/invite", views.invite, name="invite"),
    path(
        "scenarios/<int:scenario_id>/invitations/<int:invitation_id>/withdraw",
        views.withdraw,
        name="withdraw",
    ),
    path("invitations/<str:token>", views.invitation, name="invitation"),
]
