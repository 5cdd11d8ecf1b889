from __future__ import annotations

from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html

from evalplatform.accounts import policy
from evalplatform.accounts.admin_site import ReadOnlyTeamScopedAdmin, TeamScopedAdmin
from evalplatform.accounts.roles import GENERATION_EXPORT, GENERATION_MANAGE, GENERATION_VIEW
from evalplatform.errors import ApplicationError
from generation import exports, services
from generation.models import GenerationJob, GenerationOutput


@admin.register(GenerationJob)
class GenerationJobAdmin(TeamScopedAdmin):
    view_feature = GENERATION_VIEW
    change_feature = GENERATION_MANAGE
    list_display = [
        "name",
        "team",
        "owner",
        "status",
        "mode",
        "progress_bar",
        "cost_usd",
        "created_at",
    ]
    list_filter = ["status", "mode", ("team", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "owner__username"]
    list_select_related = ["team", "owner"]
    actions = ["start", "pause", "cancel", "export_csv"]
    readonly_fields = [
        "team",
        "owner",
        "name",
        "status",
        "mode",
        "source_kind",
        "source_meta",
        "repetitions",
        "temperatures",
        "max_tokens",
        "budget_usd",
        "max_retries",
        "finish_live",
        "concurrency",
        "config",
        "estimate",
        "total_cells",
        "completed_cells",
        "failed_cells",
        "cost_usd",
        "status_message",
        "created_at",
        "started_at",
        "finished_at",
    ]
    exclude = ["reserved_usd", "runner_token", "lease_until", "queued_at"]

    def has_add_permission(self, request, *args):
        return False  # jobs are created through the wizard or the API (validated whole)

    def has_change_permission(self, request, obj=None):
        return False if obj is not None else super().has_change_permission(request, obj)

    @admin.display(description="Progress")
    def progress_bar(self, job: GenerationJob) -> str:
        done = job.completed_cells + job.failed_cells
        return format_html(
            '<progress max="{}" value="{}"></progress> {}/{} · {} failed',
            job.total_cells or 1,
            done,
            done,
            job.total_cells,
            job.failed_cells,
        )

    def _each(self, request, queryset, service, verb: str):
        done = 0
        for job in queryset:
            try:
                service(user=request.user, job=job)
                done += 1
            except ApplicationError as exc:
                messages.error(request, f"{job.name}: {exc.message}")
        if done:
            messages.success(request, f"{done} job(s) {verb}.")
        return HttpResponseRedirect(request.get_full_path())

    @admin.action(description="Start or resume")
    def start(self, request, queryset):
        return self._each(request, queryset, services.job_start, "started or queued")

    @admin.action(description="Pause")
    def pause(self, request, queryset):
        return self._each(request, queryset, services.job_pause, "paused")

    @admin.action(description="Cancel")
    def cancel(self, request, queryset):
        return self._each(request, queryset, services.job_cancel, "cancelled")

    @admin.action(description="Export outputs as CSV (one job)")
    def export_csv(self, request, queryset):
        jobs = list(queryset[:2])
        if len(jobs) != 1:
            messages.error(request, "Select exactly one job to export.")
            return HttpResponseRedirect(request.get_full_path())
        if not policy.may(request.user, GENERATION_EXPORT, jobs[0]):
            messages.error(request, "You may not export this job.")
            return HttpResponseRedirect(request.get_full_path())
        return exports.csv_response(jobs[0])

    # Deleting goes through job_delete, one job at a time: its rules (not while running or
    # while provider batches are open), its audit entry. The outputs go with their job, so
    # the admin must not ask for delete permission on them (their admin is read-only).
    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def get_deleted_objects(self, objs, request):
        """A summary: Django's page would list every output (a job may have 50,000)."""
        jobs = list(objs)
        outputs = GenerationOutput.objects.filter(job__in=jobs).count()
        deleted = [f"{job} ({job.total_cells:,} outputs, with their items)" for job in jobs]
        return deleted, {"generation jobs": len(jobs), "outputs": outputs}, set(), []

    def delete_model(self, request, obj):
        try:
            services.job_delete(user=request.user, job=obj)
        except ApplicationError as exc:
            request._job_not_deleted = exc.message  # type: ignore[attr-defined]
        else:
            super().log_deletions(request, [obj])  # type: ignore[arg-type]

    def log_deletions(self, request, queryset):
        """Logged by ``delete_model`` once the job is really gone."""
        return []

    def response_delete(self, request, obj_display, obj_id):
        problem = getattr(request, "_job_not_deleted", None)
        if problem:
            messages.error(request, f"{obj_display}: {problem}")
            return HttpResponseRedirect(
                reverse("admin:generation_generationjob_change", args=[obj_id])
            )
        return super().response_delete(request, obj_display, obj_id)


@admin.register(GenerationOutput)
class GenerationOutputAdmin(ReadOnlyTeamScopedAdmin):
    view_feature = GENERATION_VIEW
    change_feature = GENERATION_MANAGE
    list_display = [
        "custom_id",
        "job",
        "item",
        "prompt",
        "model_config",
        "status",
        "output_tokens",
        "cost_usd",
        "processing_time_ms",
        "last_attempt_ms",
    ]
    list_filter = ["status", "error_kind", ("job", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["custom_id", "content", "item__item_id", "error_message"]
    list_select_related = ["job", "item", "prompt", "model_config"]
    readonly_fields = [f.name for f in GenerationOutput._meta.fields]
