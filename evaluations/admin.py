from __future__ import annotations

from django.contrib import admin

from evalplatform.accounts.roles import EVALUATIONS_VIEW_ALL, SCENARIOS_MANAGE
from evalplatform.admin_site import ReadOnlyTeamScopedAdmin
from evalplatform.errors import ApplicationError
from evaluations import invitations
from evaluations.models import Assignment, Invitation, Judgment


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


@admin.register(Invitation)
class InvitationAdmin(ReadOnlyTeamScopedAdmin):
    """Invitations are made and withdrawn on the scenario page or through the API (the link's
    token exists only in the email and the inviter's response)."""

    view_feature = SCENARIOS_MANAGE
    change_feature = SCENARIOS_MANAGE
    list_display = ["email", "scenario", "state", "invited_by", "created_at", "accepted_by"]
    list_filter = [("scenario", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["email", "accepted_by__username"]
    list_select_related = ["scenario", "invited_by", "accepted_by"]
    readonly_fields = [f.name for f in Invitation._meta.fields if f.name != "token_hash"]
    exclude = ["token_hash"]
    actions = ["withdraw"]

    @admin.action(description="Withdraw the selected invitations")
    def withdraw(self, request, queryset):
        done = 0
        for invitation in queryset:
            try:
                invitations.withdraw(user=request.user, invitation=invitation)
                done += 1
            except ApplicationError as exc:
                self.message_user(request, f"{invitation.email}: {exc.message}", level="error")
        self.message_user(request, f"{done} invitation(s) withdrawn.")
