from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("admin/", admin.site.urls),
    # The apps' APIs; the core's last (the apps depend on the core, never the reverse).
    path("api/generation/", include("generation.urls")),
    path("api/", include("evalplatform.api.urls")),
    path("generation/", include("generation.page_urls")),
    path("generation", RedirectView.as_view(url="/generation/", permanent=False)),
    path("", include("evalplatform.web.urls")),
]
