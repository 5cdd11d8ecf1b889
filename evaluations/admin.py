from __future__ import annotations

from django.contrib import admin

from evalplatform.accounts.roles import EVALUATIONS_VIEW_ALL, SCENARIOS_MANAGE
from evalplatform.admin_site import ReadOnlyTeamScopedAdmin
from evaluations.models import Assignment, Judgment


@admin.register(Judgment)
class JudgmentAdmin(ReadOnlyTeamScopedAdmin):
    view_feature = EVALUATIONS_VIEW_ALL
    change_feature = SCENARIOS_MANAGE
    list_display = ["pk", "scenario", "task", "rater_kind", "evaluator", "created_at"]
    list_filter = ["rater_kind", ("scenario", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["rationale", "evaluator__username"]
    list_select_related = ["scenario", "task", "evaluator"]
    readonly_fields = [f.name for f in Judgment._meta.fields]


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyTeamScopedAdmin):
    view_feature = EVALUATIONS_VIEW_ALL
    change_feature = SCENARIOS_MANAGE
    list_display = ["pk", "scenario", "task", "evaluator", "status", "expires_at"]
    list_filter = ["status", ("scenario", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["evaluator__username"]
    list_select_related = ["scenario", "task", "evaluator"]
    readonly_fields = [f.name for f in Assignment._meta.fields]
