"""The judge files pages, included at the site's root."""

from django.urls import path

from evaluations.judgefiles import views

app_name = "judge-files"

urlpatterns = [
    path("judge-files/", views.batch_list, name="list"),
    path("judge-files/files/<str:file_id>/content", views.file_content, name="file-content"),
    path("judge-files/<str:batch_id>", views.batch_page, name="batch"),
    path("judge-files/<str:batch_id>/compare", views.compare_choose, name="compare-choose"),
    path("judge-files/<str:batch_id>/compare/<str:other_id>", views.compare_page, name="compare"),
    path("judge-files/<str:batch_id>/<str:action>", views.batch_action, name="action"),
]
