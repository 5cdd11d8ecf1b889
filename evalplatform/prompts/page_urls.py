"""The prompt pages, included under ``/prompts/`` by the project's URLconf."""

from django.urls import path

from evalplatform.prompts import views

app_name = "prompts"

urlpatterns = [
    path("", views.template_list, name="list"),
    path("new", views.template_new, name="template-new"),
    path("preview", views.preview, name="preview"),
    path("<int:template_id>", views.template_page, name="template"),
    path("<int:template_id>/versions/new", views.version_new, name="version-new"),
    path("versions/<int:version_id>/edit", views.version_edit, name="version-edit"),
]
