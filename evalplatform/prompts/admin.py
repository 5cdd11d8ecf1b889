from __future__ import annotations

from django import forms
from django.contrib import admin
from django.db import transaction
from django.db.models import Count, Max
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from evalplatform.accounts import policy
from evalplatform.accounts.admin_site import TeamScopedAdmin, TeamScopedInline
from evalplatform.accounts.roles import PROMPTS_EDIT, PROMPTS_VIEW
from evalplatform.errors import ApplicationError
from evalplatform.prompts import services
from evalplatform.prompts.models import PromptBlock, PromptTemplate, PromptVersion
from evalplatform.prompts.rendering import MissingVariables, variables_in


class VersionListInline(admin.TabularInline):
    model = PromptVersion
    fields = ("link", "note", "locked_at", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_view_permission(self, request, obj=None):
        return True

    @admin.display(description="Version")
    def link(self, version: PromptVersion) -> str:
        url = reverse("admin:prompts_promptversion_change", args=[version.pk])
        return format_html('<a href="{}">v{}</a>', url, version.number)


@admin.register(PromptTemplate)
class PromptTemplateAdmin(TeamScopedAdmin):
    view_feature = PROMPTS_VIEW
    change_feature = PROMPTS_EDIT
    list_display = ["name", "team", "updated_at"]
    list_filter = [("team", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "description"]
    list_select_related = ["team"]
    fields = ["team", "name", "description"]
    inlines = [VersionListInline]

    def save_model(self, request, obj, form, change):
        if obj.pk is None:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

    def get_deleted_objects(self, objs, request):
        # Templates with used versions stay (the service's rule); the admin lists them as
        # protected and deletes nothing, for one object and for the bulk action alike.
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        used = PromptTemplate.objects.filter(
            pk__in=[t.pk for t in objs], versions__locked_at__isnull=False
        ).distinct()
        protected = [*protected, *(f"{t.name} (has versions used by jobs)" for t in used)]
        return deleted, counts, perms_needed, protected

    def delete_model(self, request, obj):
        services.template_delete(user=request.user, template=obj)

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for template in queryset:
                services.template_delete(user=request.user, template=template)


class BlockForm(forms.ModelForm):
    class Meta:
        model = PromptBlock
        fields = ["position", "title", "body"]

    def clean_body(self):
        body = self.cleaned_data.get("body") or ""
        if problem := services.malformed_in(body):
            raise forms.ValidationError(problem)
        return body


class BlockInline(TeamScopedInline):
    model = PromptBlock
    form = BlockForm
    change_feature = PROMPTS_EDIT
    fields = ["position", "title", "body"]
    extra = 1
    ordering = ["position"]


class VersionForm(forms.ModelForm):
    saving_as_new = False

    class Meta:
        model = PromptVersion
        fields = ["template", "note", "default_variables", "sample_item"]

    def clean(self):
        cleaned = super().clean()
        if self.instance.pk and self.instance.is_locked and not self.saving_as_new:
            raise forms.ValidationError(
                "This version is used by a job and can no longer change. "
                "Use “Save as new version” to keep your edits as the next version."
            )
        return cleaned


@admin.register(PromptVersion)
class PromptVersionAdmin(TeamScopedAdmin):
    view_feature = PROMPTS_VIEW
    change_feature = PROMPTS_EDIT
    team_fk_fields = ()
    form = VersionForm
    save_as = True
    save_as_continue = True
    list_display = ["__str__", "template", "number", "note", "locked_at", "created_at"]
    list_filter = [("template__team", admin.RelatedOnlyFieldListFilter), "locked_at"]
    search_fields = ["template__name", "note"]
    list_select_related = ["template__team"]
    readonly_fields = ["number", "locked_at", "variables", "preview"]
    inlines = [BlockInline]

    def get_fields(self, request, obj=None):
        return [
            "template",
            "number",
            "note",
            "locked_at",
            "default_variables",
            "sample_item",
            "variables",
            "preview",
        ]

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)
        return type("BoundVersionForm", (form,), {"saving_as_new": "_saveasnew" in request.POST})

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "template":
            kwargs["queryset"] = policy.visible(
                request.user, PROMPTS_EDIT, PromptTemplate.objects.all()
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request, obj, form, change):
        if obj.pk is None:
            with transaction.atomic():
                last = PromptVersion.objects.filter(template=obj.template).aggregate(
                    n=Max("number")
                )["n"]
                obj.number = (last or 0) + 1
                obj.created_by = request.user
                obj.locked_at = None
                obj.save()
            return
        super().save_model(request, obj, form, change)

    def get_deleted_objects(self, objs, request):
        # Used versions, and the last versions of a template, stay (the service's rules).
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        versions = list(objs)
        chosen: dict[int, int] = {}
        for version in versions:
            chosen[version.template_id] = chosen.get(version.template_id, 0) + 1
        totals = dict(
            PromptVersion.objects.filter(template_id__in=chosen)
            .values_list("template_id")
            .annotate(n=Count("id"))
        )
        extra = [f"{v} (used by a job)" for v in versions if v.is_locked]
        extra += [
            f"every version of {v.template.name} (a template keeps one)"
            for v in {v.template_id: v for v in versions}.values()
            if totals.get(v.template_id) == chosen[v.template_id]
        ]
        return deleted, counts, perms_needed, [*protected, *extra]

    def delete_model(self, request, obj):
        services.version_delete(user=request.user, version=obj)

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for version in queryset.select_related("template"):
                services.version_delete(user=request.user, version=version)

    @admin.display(description="Variables")
    def variables(self, obj: PromptVersion) -> str:
        if not obj.pk:
            return "-"
        names = variables_in(obj.as_blocks())
        return ", ".join(f"{{{{{n}}}}}" for n in names) or "none"

    @admin.display(description="Rendered preview (sample item)")
    def preview(self, obj: PromptVersion) -> str:
        if not obj.pk:
            return "Save the version to see a preview."
        try:
            [rendered] = services.version_render(version=obj, items=[("sample", obj.sample_item)])
        except MissingVariables as exc:
            return format_html(
                "<p>The sample item lacks: {}</p>",
                format_html_join(", ", "<code>{}</code>", ((m.variable,) for m in exc.missing)),
            )
        except ApplicationError as exc:
            return exc.message
        return format_html(
            "<strong>System</strong><pre>{}</pre><strong>User</strong><pre>{}</pre>",
            rendered.system or "(none)",
            rendered.user,
        )
