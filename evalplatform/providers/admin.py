from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_post_parameters, sensitive_variables

from evalplatform.accounts import policy
from evalplatform.accounts.admin_site import TeamScopedAdmin
from evalplatform.accounts.roles import PROVIDERS_MANAGE, PROVIDERS_VIEW
from evalplatform.errors import ApplicationError
from evalplatform.providers import services
from evalplatform.providers.models import LLMModel, ProviderConnection

_CONNECTION_FORM_FIELDS = ["team", *services.CONNECTION_FIELDS]


class ConnectionForm(forms.ModelForm):
    api_key = forms.CharField(
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted and never shown again. Leave blank to keep the stored key.",
    )
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored API key")

    class Meta:
        model = ProviderConnection
        fields = _CONNECTION_FORM_FIELDS

    base_url = forms.URLField(required=False, assume_scheme="https")

    def clean(self):
        cleaned = super().clean() or {}
        instance = self.instance
        if (
            instance.pk
            and instance.has_api_key
            and not (cleaned.get("api_key") or cleaned.get("clear_api_key"))
        ):
            before = ProviderConnection.objects.get(pk=instance.pk)
            if (cleaned.get("kind"), (cleaned.get("base_url") or "").rstrip("/")) != (
                before.kind,
                before.base_url.rstrip("/"),
            ):
                self.add_error(
                    "api_key",
                    "Give the API key again when changing the base URL or kind: the stored "
                    "key is never sent to a new address.",
                )
        return cleaned

    def clean_api_key(self):
        key = self.cleaned_data.get("api_key") or ""
        try:
            services.validate_api_key(key)
        except ApplicationError as exc:
            raise forms.ValidationError(exc.extra["errors"]["api_key"][0]) from exc
        return key

    def clean_kind(self):
        kind = self.cleaned_data["kind"]
        instance = self.instance
        if instance.pk and kind != instance.kind and instance.models.exists():
            raise forms.ValidationError("The kind cannot change while the connection has models.")
        return kind


@admin.register(ProviderConnection)
class ProviderConnectionAdmin(TeamScopedAdmin):
    form = ConnectionForm
    view_feature = PROVIDERS_MANAGE
    change_feature = PROVIDERS_MANAGE
    list_display = ["name", "kind", "team", "base_url", "api_key_status", "active"]
    list_filter = ["kind", "active", ("team", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "base_url"]
    list_select_related = ["team"]
    readonly_fields = ["api_key_status", "created_at", "updated_at"]
    actions = ["load_catalog", "test_connection"]

    fieldsets = [
        (None, {"fields": ["team", "name", "kind", "base_url", "active"]}),
        ("Credentials", {"fields": ["api_key_status", "api_key", "clear_api_key"]}),
        (
            "Limits",
            {
                "fields": [
                    "max_tokens_param",
                    "max_concurrency",
                    "requests_per_minute",
                    "timeout_s",
                    "options",
                ]
            },
        ),
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    @admin.display(description="API key")
    def api_key_status(self, obj: ProviderConnection) -> str:
        return "stored (encrypted)" if obj.pk and obj.has_api_key else "not set"

    @method_decorator(sensitive_post_parameters("api_key"))
    @method_decorator(sensitive_variables())
    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        return super().changeform_view(request, object_id, form_url, extra_context)

    @method_decorator(sensitive_variables())
    def save_model(self, request, obj, form, change):
        # The form has put its (validated) values on ``obj``, defaults included.
        data = {name: getattr(obj, name) for name in _CONNECTION_FORM_FIELDS}
        api_key = form.cleaned_data.get("api_key") or None
        if form.cleaned_data.get("clear_api_key"):
            api_key = ""
        if change:
            data.pop("team")
            saved = services.connection_update(
                user=request.user, connection=obj, api_key=api_key, **data
            )
        else:
            team = data.pop("team")
            saved = services.connection_create(
                user=request.user, team=team, api_key=api_key or "", **data
            )
        obj.pk = saved.pk
        obj.api_key_encrypted = saved.api_key_encrypted

    @admin.action(description="Test the selected connections (one tiny request each)")
    def test_connection(self, request, queryset):
        for connection in queryset.select_related("team"):
            try:
                result = services.connection_test(user=request.user, connection=connection)
            except ApplicationError as exc:
                messages.error(request, f"{connection.name}: {exc.message} {exc.extra}")
                continue
            if result["ok"]:
                messages.success(
                    request,
                    f"{connection.name}: {result['model']} answered in {result['latency_ms']} ms.",
                )
            else:
                messages.error(
                    request,
                    f"{connection.name}: {result['model']} failed ({result['message']}). "
                    f"{result['hint']}",
                )

    @admin.action(description="Load the default model catalog into the selected connections")
    def load_catalog(self, request, queryset):
        created = updated = 0
        for connection in queryset.select_related("team"):
            if not policy.may(request.user, PROVIDERS_MANAGE, connection):
                continue
            counts = services.catalog_load(team=connection.team, connection=connection)
            created += counts["created"]
            updated += counts["updated"]
        messages.success(request, f"Catalog loaded: {created} models created, {updated} updated.")


@admin.register(LLMModel)
class LLMModelAdmin(TeamScopedAdmin):
    view_feature = PROVIDERS_VIEW
    change_feature = PROVIDERS_MANAGE
    list_display = [
        "display_name",
        "model_id",
        "connection",
        "input_price_per_mtok",
        "output_price_per_mtok",
        "batch_discount",
        "supports_batch",
        "active",
        "catalog_date",
    ]
    list_filter = [
        "active",
        "supports_batch",
        "connection__kind",
        ("connection__team", admin.RelatedOnlyFieldListFilter),
    ]
    search_fields = ["display_name", "model_id"]
    list_select_related = ["connection__team"]
    readonly_fields = ["catalog_date", "created_at", "updated_at"]

    def get_readonly_fields(self, request, obj=None):
        # A model never moves between connections (and so never between teams).
        return [*self.readonly_fields, "connection"] if obj else self.readonly_fields

    def save_model(self, request, obj, form, change):
        data = {
            name: form.cleaned_data[name]
            for name in services.MODEL_FIELDS
            if name in form.cleaned_data
        }
        if change:
            services.model_update(user=request.user, model=obj, **data)
        else:
            obj.pk = services.model_create(
                user=request.user, connection=form.cleaned_data["connection"], **data
            ).pk

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "connection":
            kwargs["queryset"] = policy.visible(
                request.user, PROVIDERS_MANAGE, ProviderConnection.objects.all()
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
