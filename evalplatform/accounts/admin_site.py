"""The admin console. Superusers see everything; team admins and managers see their teams only.

Access to the console needs ``feature:admin:access`` in some team; what each page shows and
allows is decided by ``TeamScopedAdmin`` through the one policy.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Model, QuerySet
from django.http import Http404, HttpRequest

from evalplatform.accounts import policy
from evalplatform.accounts.roles import ADMIN_ACCESS
from evalplatform.accounts.throttle import ThrottledAdminAuthenticationForm


class PlatformAdminAuthenticationForm(ThrottledAdminAuthenticationForm):
    """Signs in whoever the policy lets into the console (not Django's ``is_staff``), with
    the sign-in throttling of ``accounts.throttle``."""

    def confirm_login_allowed(self, user) -> None:
        if not (user.is_active and policy.has_feature_anywhere(user, ADMIN_ACCESS)):
            raise forms.ValidationError(
                "This account may not use the admin console. Team admins and managers may.",
                code="invalid_login",
            )


class PlatformAdminSite(admin.AdminSite):
    login_form = PlatformAdminAuthenticationForm
    site_header = "Evaluation platform"
    site_title = "Evaluation platform admin"
    index_title = "Console"

    def has_permission(self, request: HttpRequest) -> bool:
        user = request.user
        return bool(user.is_active and policy.has_feature_anywhere(user, ADMIN_ACCESS))


class TeamScopedAdmin(admin.ModelAdmin):
    """Admin for a team-scoped model (the model names its ``team_lookup``).

    Rows of teams where the user lacks ``view_feature`` are not there: their pages are 404s,
    exactly like missing rows. Changes need ``change_feature`` in the row's team.
    """

    view_feature: str
    change_feature: str
    team_fk_fields: tuple[str, ...] = ("team",)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return policy.visible(request.user, self.view_feature, super().get_queryset(request))

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None):
        obj = super().get_object(request, object_id, from_field)
        if obj is None:
            raise Http404("Not found.")
        return obj

    def has_module_permission(self, request: HttpRequest) -> bool:
        return policy.has_feature_anywhere(request.user, self.view_feature)

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        if obj is None:
            return policy.has_feature_anywhere(request.user, self.view_feature)
        return policy.may(request.user, self.view_feature, obj)

    def _may_change(self, request: HttpRequest, obj: Model | None) -> bool:
        if obj is None:
            return policy.has_feature_anywhere(request.user, self.change_feature)
        return policy.may(request.user, self.change_feature, obj)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return policy.has_feature_anywhere(request.user, self.change_feature)

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self._may_change(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self._may_change(request, obj)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name in self.team_fk_fields:
            kwargs["queryset"] = policy.teams_with(request.user, self.change_feature)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class ReadOnlyTeamScopedAdmin(TeamScopedAdmin):
    """Rows written only by the platform itself (outputs, provider batches): listed, searched
    and viewed, never added, changed or deleted here. Actions still need ``change_feature``."""

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False if obj is not None else super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class TeamScopedInline(admin.TabularInline):
    """An inline whose rows belong to the parent's team: permissions follow the parent."""

    change_feature: str

    def has_add_permission(self, request, obj=None):
        return obj is None or policy.may(request.user, self.change_feature, obj)

    def has_change_permission(self, request, obj=None):
        return obj is None or policy.may(request.user, self.change_feature, obj)

    def has_delete_permission(self, request, obj=None):
        return obj is None or policy.may(request.user, self.change_feature, obj)

    def has_view_permission(self, request, obj=None):
        return True  # the parent page already passed the view check
