from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # The apps' APIs; the core's last (the apps depend on the core, never the reverse).
    path("api/generation/", include("generation.urls")),
    path("api/", include("evalplatform.api.urls")),
    path("", include("evalplatform.web.urls")),
]
