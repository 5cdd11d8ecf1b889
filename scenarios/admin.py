from __future__ import annotations

from django.contrib import admin

from evalplatform.accounts.admin_site import ReadOnlyTeamScopedAdmin
from evalplatform.accounts.roles import SCENARIOS_MANAGE, SCENARIOS_VIEW
from scenarios.models import Scenario, Variant


@admin.register(Scenario)
class ScenarioAdmin(ReadOnlyTeamScopedAdmin):
    """Scenarios are made from jobs or uploads (validated whole) through the API."""

    view_feature = SCENARIOS_VIEW
    change_feature = SCENARIOS_MANAGE
    list_display = ["name", "team", "type", "status", "blind", "overlap", "created_at"]
    list_filter = ["type", "status", ("team", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name"]
    list_select_related = ["team"]
    readonly_fields = [f.name for f in Scenario._meta.fields]


@admin.register(Variant)
class VariantAdmin(ReadOnlyTeamScopedAdmin):
    view_feature = SCENARIOS_VIEW
    change_feature = SCENARIOS_MANAGE
    list_display = ["variant_id", "scenario", "item", "model_label", "prompt_label"]
    list_filter = [("scenario", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["variant_id", "content", "model_label", "prompt_label"]
    list_select_related = ["scenario", "item"]
    readonly_fields = [f.name for f in Variant._meta.fields]
