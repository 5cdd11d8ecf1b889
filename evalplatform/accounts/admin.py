from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db.models import Count
from django.http import Http404

from evalplatform.accounts import audit, policy, services
from evalplatform.accounts.admin_site import (
    ReadOnlyTeamScopedAdmin,
    TeamScopedAdmin,
    TeamScopedInline,
)
from evalplatform.accounts.models import ApiToken, AuditEvent, Membership, Team, TeamGroup
from evalplatform.accounts.roles import (
    ACCOUNTS_MANAGE,
    ACCOUNTS_VIEW,
    ROLE_FEATURES,
    SCENARIOS_MANAGE,
)


def _user_choices(request, feature: str = ACCOUNTS_MANAGE):
    """Superusers pick any user; team admins pick among the people already in their teams
    (adding people from outside goes through a superuser or an invitation)."""
    users = get_user_model().objects.order_by("username")
    if policy.is_superuser(request.user):
        return users
    return users.filter(memberships__team__in=policy.teams_with(request.user, feature)).distinct()


def _membership_changed(request, membership: Membership, verb: str) -> None:
    audit.record(
        user=request.user,
        team=membership.team_id,
        action=f"accounts.membership.{verb}",
        target=membership,
        member=membership.user.get_username(),
        role=membership.role,
    )


class MembershipInline(TeamScopedInline):
    model = Membership
    change_feature = ACCOUNTS_MANAGE
    extra = 0

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "user":
            kwargs["queryset"] = _user_choices(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


@admin.register(Team)
class TeamAdmin(TeamScopedAdmin):
    view_feature = ACCOUNTS_VIEW
    change_feature = ACCOUNTS_MANAGE
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]

    def has_add_permission(self, request, *args):
        return policy.is_superuser(request.user)

    def has_delete_permission(self, request, obj=None):
        return policy.is_superuser(request.user)

    def save_formset(self, request, form, formset, change):
        super().save_formset(request, form, formset, change)
        if formset.model is Membership:
            for membership in formset.new_objects:
                _membership_changed(request, membership, "add")
            for membership, _fields in formset.changed_objects:
                _membership_changed(request, membership, "change")
            for membership in formset.deleted_objects:
                _membership_changed(request, membership, "remove")


@admin.register(Membership)
class MembershipAdmin(TeamScopedAdmin):
    view_feature = ACCOUNTS_VIEW
    change_feature = ACCOUNTS_MANAGE
    list_display = ["user", "team", "role", "features", "created_at"]
    list_filter = ["role", ("team", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["user__username", "user__email", "team__name"]
    list_select_related = ["user", "team"]

    @admin.display(description="Feature count")
    def features(self, obj: Membership) -> int:
        return len(ROLE_FEATURES.get(obj.role, ()))

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        _membership_changed(request, obj, "change" if change else "add")

    def delete_model(self, request, obj):
        _membership_changed(request, obj, "remove")
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        for membership in queryset.select_related("user"):
            _membership_changed(request, membership, "remove")
        super().delete_queryset(request, queryset)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "user":
            kwargs["queryset"] = _user_choices(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class TeamGroupForm(forms.ModelForm):
    class Meta:
        model = TeamGroup
        fields = ["team", "name", "members"]

    def clean(self):
        data = super().clean() or {}
        team, members = data.get("team"), data.get("members")
        if team is not None and members is not None:
            outsiders = members.exclude(memberships__team=team)
            if outsiders.exists():
                names = ", ".join(u.get_username() for u in outsiders[:10])
                self.add_error("members", f"Not members of {team}: {names}.")
        return data


@admin.register(TeamGroup)
class TeamGroupAdmin(TeamScopedAdmin):
    """Evaluator groups. Members are picked among the members of the group's team (checked
    on save, so a group never holds an outsider)."""

    view_feature = ACCOUNTS_VIEW
    change_feature = SCENARIOS_MANAGE
    list_display = ["name", "team", "member_count", "created_at"]
    list_filter = [("team", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "team__name", "members__username"]

    def get_readonly_fields(self, request, obj=None):
        # A group stays in its team: scenarios of that team may be assigned to it.
        fields = list(super().get_readonly_fields(request, obj))
        return [*fields, "team"] if obj is not None else fields

    list_select_related = ["team"]
    filter_horizontal = ["members"]
    form = TeamGroupForm

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(member_total=Count("members"))

    @admin.display(description="Members", ordering="member_total")
    def member_count(self, obj: TeamGroup) -> int:
        return obj.member_total  # type: ignore[attr-defined]

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.name == "members":
            kwargs["queryset"] = _user_choices(request, SCENARIOS_MANAGE)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        audit.record(
            user=request.user,
            team=form.instance.team_id,
            action=f"accounts.group.{'change' if change else 'create'}",
            target=form.instance,
            members=sorted(u.get_username() for u in form.instance.members.all()),
        )

    # A group that scenarios are assigned to is protected: the console's delete page lists
    # those scenarios and refuses, as the API's 409 does.
    def delete_model(self, request, obj):
        audit.record(
            user=request.user, team=obj.team_id, action="accounts.group.delete", target=obj
        )
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        for group in queryset:
            audit.record(
                user=request.user, team=group.team_id, action="accounts.group.delete", target=group
            )
        super().delete_queryset(request, queryset)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """API tokens. Everyone with console access manages their own; superusers all."""

    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__username", "prefix"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def get_queryset(self, request):
        qs = super().get_queryset(request).select_related("user")
        return qs if policy.is_superuser(request.user) else qs.filter(user=request.user)

    def get_object(self, request, object_id, from_field=None):
        obj = super().get_object(request, object_id, from_field)
        if obj is None:
            raise Http404("Not found.")
        return obj

    def get_fields(self, request, obj=None):
        # The owner is chosen once (superusers only) and never changes: a token is a key to
        # one account. Revoking is the list action; a revoked token stays revoked.
        owner = ["user"] if policy.is_superuser(request.user) else []
        return ["name", *owner, "can_mint_tokens", *self.readonly_fields]

    def get_readonly_fields(self, request, obj=None):
        # What a token may do is chosen when it is made.
        return [*self.readonly_fields, "user", "can_mint_tokens"] if obj else self.readonly_fields

    def has_module_permission(self, request):
        return request.user.is_active

    def has_view_permission(self, request, obj=None):
        return obj is None or policy.is_superuser(request.user) or obj.user_id == request.user.pk

    has_change_permission = has_view_permission
    has_delete_permission = has_view_permission

    def has_add_permission(self, request):
        return request.user.is_active

    def save_model(self, request, obj, form, change):
        if change:
            obj.save()
            return
        user = obj.user if policy.is_superuser(request.user) and obj.user_id else request.user
        token, key = services.token_create(
            user=user, name=obj.name, can_mint_tokens=obj.can_mint_tokens
        )
        obj.pk, obj.user, obj.prefix, obj.key_hash = (
            token.pk,
            token.user,
            token.prefix,
            token.key_hash,
        )
        obj.created_at = token.created_at
        messages.warning(
            request,
            f"The token key is {key} — copy it now: it is stored hashed and will not be "
            "shown again.",
        )

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset):
        count = services.tokens_revoke(tokens=queryset, by=request.user)
        messages.success(request, f"{count} tokens revoked.")


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyTeamScopedAdmin):
    """The audit log: read only, for the team's managers of accounts."""

    view_feature = ACCOUNTS_MANAGE
    change_feature = ACCOUNTS_MANAGE
    list_display = ["created_at", "username", "action", "target", "team"]
    list_filter = ["action", ("team", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["username", "action", "target"]
    list_select_related = ["team"]
    readonly_fields = [f.name for f in AuditEvent._meta.fields]
