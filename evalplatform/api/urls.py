from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import SimpleRouter

from evalplatform.accounts.api import (
    AuditEventViewSet,
    GroupViewSet,
    MeView,
    NotificationViewSet,
    TokenViewSet,
)
from evalplatform.prompts.api import TemplateViewSet, VersionViewSet
from evalplatform.providers.api import ConnectionViewSet, LLMModelViewSet

# No trailing slashes, as the generation spec's endpoints (/api/generation/jobs/:id/start).
router = SimpleRouter(trailing_slash=False)
router.register("providers/connections", ConnectionViewSet, basename="connection")
router.register("providers/models", LLMModelViewSet, basename="llmmodel")
router.register("prompts/templates", TemplateViewSet, basename="prompttemplate")
router.register("prompts/versions", VersionViewSet, basename="promptversion")
router.register("tokens", TokenViewSet, basename="apitoken")
router.register("notifications", NotificationViewSet, basename="notification")
router.register("audit", AuditEventViewSet, basename="auditevent")
router.register("groups", GroupViewSet, basename="teamgroup")

urlpatterns = [
    path("me", MeView.as_view(), name="api-me"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("", include(router.urls)),
]
