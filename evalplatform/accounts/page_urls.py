from django.urls import path

from evalplatform.accounts import views

urlpatterns = [
    path("teams/<slug:team>/groups", views.groups, name="accounts-groups"),
]
