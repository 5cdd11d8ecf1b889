from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("evalplatform.api.urls")),
    path("", include("evalplatform.web.urls")),
]
