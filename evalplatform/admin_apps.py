from django.contrib.admin.apps import AdminConfig


class PlatformAdminConfig(AdminConfig):
    """The stock admin app with the platform's team-aware site as ``admin.site``."""

    default_site = "evalplatform.accounts.admin_site.PlatformAdminSite"
