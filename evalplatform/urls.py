from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

handler404 = "evalplatform.api.exceptions.not_found"
handler500 = "evalplatform.api.exceptions.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    # The apps' APIs; the core's last (the apps depend on the core, never the reverse).
    # Scenarios first: it serves the spec's api/generation/jobs/{id}/to-scenario.
    path("api/", include("scenarios.urls")),
    path("api/generation/", include("generation.urls")),
    path("api/", include("evaluations.manager.urls")),
    path("api/", include("evaluations.invitations.urls")),
    path("api/", include("evaluations.judges.urls")),
    path("api/", include("evaluations.analytics.urls")),
    path("api/", include("evaluations.planner.urls")),
    path("api/", include("evaluations.quality.urls")),
    path("api/", include("evaluations.review.urls")),
    path("api/evaluations/", include("evaluations.workspace.urls")),
    path("api/", include("evaluations.judgefiles.urls")),
    path("api/", include("evalplatform.api.urls")),
    # The OpenAI Files + Batches API of judge files (the official SDK's base URL: /v1), and
    # Anthropic's Message Batches API over them (the SDK's base URL: the site's root).
    path("v1/messages/", include("evaluations.judgefiles.anthropic_urls")),
    path("v1/", include("evaluations.judgefiles.openai_urls")),
    # The pages. The manager's after the other scenarios/<id>/… pages (its
    # scenarios/<id>/<action> would take them); the scenarios app's before generation's (its
    # jobs/<id>/<action> would take generation/jobs/<id>/to-scenario).
    path("", include("evaluations.analytics.page_urls")),
    path("", include("evaluations.planner.page_urls")),
    path("", include("evaluations.invitations.page_urls")),
    path("", include("evaluations.judges.page_urls")),
    path("", include("evaluations.judgefiles.page_urls")),
    path("", include("evaluations.quality.page_urls")),
    path("", include("evaluations.review.page_urls")),
    path("", include("evaluations.manager.page_urls")),
    path("generation/", include("scenarios.page_urls")),
    path("generation/", include("generation.page_urls")),
    path("evaluate/", include("evaluations.workspace.page_urls")),
    path("prompts/", include("evalplatform.prompts.page_urls")),
    path("", include("evalplatform.accounts.page_urls")),
    path("generation", RedirectView.as_view(url="/generation/", permanent=False)),
    path("", include("evalplatform.web.urls")),
]
