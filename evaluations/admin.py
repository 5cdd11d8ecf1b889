from __future__ import annotations

from django.contrib import admin

from evalplatform.accounts.admin_site import ReadOnlyTeamScopedAdmin
from evalplatform.accounts.roles import (
    EVALUATIONS_JUDGE,
    EVALUATIONS_JUDGE_FILES,
    EVALUATIONS_VIEW_ALL,
    SCENARIOS_MANAGE,
    SCENARIOS_VIEW,
)
from evalplatform.errors import ApplicationError
from evaluations.invitations import services as invitations
from evaluations.judges import services as judges
from evaluations.models import (
    Adjudication,
    Assignment,
    BudgetPlan,
    Invitation,
    JudgeBatch,
    JudgeFile,
    JudgeRun,
    Judgment,
    LLMJudge,
    TeamTrustGate,
    TrustGate,
)


@admin.register(Judgment)
class JudgmentAdmin(ReadOnlyTeamScopedAdmin):
    view_feature = EVALUATIONS_VIEW_ALL
    change_feature = SCENARIOS_MANAGE
    list_display = ["pk", "scenario", "task", "rater_kind", "evaluator", "created_at"]
    list_filter = ["rater_kind", ("scenario", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["rationale", "evaluator__username"]
    list_select_related = ["scenario", "task", "evaluator"]
    readonly_fields = [f.name for f in Judgment._meta.fields]


@admin.register(Adjudication)
class AdjudicationAdmin(ReadOnlyTeamScopedAdmin):
    """Adjudicated answers are set on the review page or through the API (checked there)."""

    view_feature = EVALUATIONS_VIEW_ALL
    change_feature = SCENARIOS_MANAGE
    list_display = ["pk", "scenario", "task", "set_by", "set_at"]
    list_filter = [("scenario", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["note", "set_by__username"]
    list_select_related = ["scenario", "task", "set_by"]
    readonly_fields = [f.name for f in Adjudication._meta.fields]


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


@admin.register(LLMJudge)
class LLMJudgeAdmin(ReadOnlyTeamScopedAdmin):
    """Judges are configured on the scenario page or through the API (checked there); here
    they are listed, and run or retried with the same services."""

    view_feature = SCENARIOS_VIEW
    change_feature = EVALUATIONS_JUDGE
    list_display = ["name", "scenario", "llm_model", "prompt_version", "swap", "mode"]
    list_filter = ["mode", "swap", ("scenario", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "scenario__name"]
    list_select_related = ["scenario", "llm_model", "prompt_version__template"]
    readonly_fields = [f.name for f in LLMJudge._meta.fields]
    actions = ["run_unjudged", "retry_failed"]

    @admin.action(description="Run over the tasks they have not judged yet")
    def run_unjudged(self, request, queryset):
        for judge in queryset:
            try:
                run = judges.judge_run(user=request.user, judge=judge, data={})
                self.message_user(request, f"{judge.name}: job {run.job_id} started.")
            except ApplicationError as exc:
                self.message_user(request, f"{judge.name}: {exc.message}", level="error")

    @admin.action(description="Retry their failed calls")
    def retry_failed(self, request, queryset):
        for judge in queryset:
            try:
                retried = judges.judge_retry_failed(user=request.user, judge=judge)
                self.message_user(request, f"{judge.name}: {retried} call(s) asked again.")
            except ApplicationError as exc:
                self.message_user(request, f"{judge.name}: {exc.message}", level="error")


@admin.register(JudgeRun)
class JudgeRunAdmin(ReadOnlyTeamScopedAdmin):
    view_feature = SCENARIOS_VIEW
    change_feature = EVALUATIONS_JUDGE
    list_display = ["judge", "job", "tasks", "created_by", "created_at"]
    list_select_related = ["judge", "job", "created_by"]
    readonly_fields = [f.name for f in JudgeRun._meta.fields]


@admin.register(TrustGate)
class TrustGateAdmin(ReadOnlyTeamScopedAdmin):
    """Trust gates, read only: they are set on the analytics page or through the API, where
    they are validated and audited (docs/analytics.md, "Trust gates")."""

    view_feature = EVALUATIONS_VIEW_ALL
    change_feature = SCENARIOS_MANAGE
    list_display = ["scenario", "min_kappa", "min_shared_items", "max_flip_rate",
                    "max_parse_failure_rate", "include_untrusted", "updated_at"]  # fmt: skip
    list_select_related = ["scenario", "updated_by"]
    readonly_fields = [f.name for f in TrustGate._meta.fields]


@admin.register(TeamTrustGate)
class TeamTrustGateAdmin(ReadOnlyTeamScopedAdmin):
    """Teams' default trust gates, read only: they are set on the team's trust gate page or
    through the API, where they are validated and audited."""

    view_feature = EVALUATIONS_VIEW_ALL
    change_feature = SCENARIOS_MANAGE
    list_display = ["team", "min_kappa", "min_shared_items", "max_flip_rate",
                    "max_parse_failure_rate", "include_untrusted", "updated_at"]  # fmt: skip
    list_select_related = ["team", "updated_by"]
    readonly_fields = [f.name for f in TeamTrustGate._meta.fields]


@admin.register(JudgeBatch)
class JudgeBatchAdmin(ReadOnlyTeamScopedAdmin):
    """Judge-file batches (the OpenAI Batches API's), read only: run and cancel them through
    the API or their page."""

    view_feature = EVALUATIONS_VIEW_ALL
    change_feature = EVALUATIONS_JUDGE_FILES
    list_display = ["public_id", "team", "input_file", "status", "total", "completed", "failed",
                    "created_at"]  # fmt: skip
    list_filter = ["status"]
    list_select_related = ["team", "input_file"]
    search_fields = ["public_id", "input_file__filename"]
    readonly_fields = [f.name for f in JudgeBatch._meta.fields]


@admin.register(JudgeFile)
class JudgeFileAdmin(ReadOnlyTeamScopedAdmin):
    """Judge files (uploads, and batches' output and error files), read only."""

    view_feature = EVALUATIONS_VIEW_ALL
    change_feature = EVALUATIONS_JUDGE_FILES
    list_display = ["public_id", "team", "filename", "purpose", "lines", "bytes", "created_at"]
    list_filter = ["purpose"]
    list_select_related = ["team"]
    search_fields = ["public_id", "filename"]
    readonly_fields = [f.name for f in JudgeFile._meta.fields]


@admin.register(BudgetPlan)
class BudgetPlanAdmin(ReadOnlyTeamScopedAdmin):
    """The budget scheduler's proposals and re-plans, read only: they are proposed and
    accepted on the plan page or through the API (checked there; an accepted plan's
    tasks and judge runs are made with it, all or nothing)."""

    view_feature = EVALUATIONS_VIEW_ALL
    change_feature = SCENARIOS_MANAGE
    list_display = ["pk", "scenario", "status", "chain", "replans", "trigger", "new_verdicts",
                    "reason", "created_by", "created_at", "accepted_at"]  # fmt: skip
    list_filter = ["status", "trigger", ("scenario", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["scenario__name", "created_by__username"]
    list_select_related = ["scenario", "created_by", "chain", "replans"]
    readonly_fields = [f.name for f in BudgetPlan._meta.fields]
