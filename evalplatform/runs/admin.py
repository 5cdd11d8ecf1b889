from __future__ import annotations

from django.contrib import admin

from evalplatform.accounts.admin_site import ReadOnlyTeamScopedAdmin
from evalplatform.accounts.roles import GENERATION_MANAGE, GENERATION_VIEW
from evalplatform.runs.models import ProviderBatch


@admin.register(ProviderBatch)
class ProviderBatchAdmin(ReadOnlyTeamScopedAdmin):
    """The batch registry, read-only: the batch driver alone changes it."""

    view_feature = GENERATION_VIEW
    change_feature = GENERATION_MANAGE
    list_display = [
        "name",
        "team",
        "connection",
        "model_id",
        "state",
        "request_count",
        "succeeded",
        "failed",
        "round",
        "created_at",
        "closed_at",
    ]
    list_filter = ["state", "protocol", ("team", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "remote_id", "model_id"]
    list_select_related = ["team", "connection"]
    exclude = ["custom_ids"]
    readonly_fields = [f.name for f in ProviderBatch._meta.fields if f.name != "custom_ids"]
