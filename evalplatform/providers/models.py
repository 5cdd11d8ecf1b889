from __future__ import annotations

import json
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from evalplatform import validation
from evalplatform.accounts.models import Team
from evalplatform.providers import crypto

MAX_OPTIONS_CHARS = 10_000


class ProviderKind(models.TextChoices):
    OPENAI = "openai", "OpenAI-compatible"
    ANTHROPIC = "anthropic", "Anthropic"
    GEMINI = "gemini", "Gemini"
    MOCK = "mock", "Mock (offline)"


class MaxTokensParam(models.TextChoices):
    MAX_COMPLETION_TOKENS = "max_completion_tokens", "max_completion_tokens (OpenAI)"
    MAX_TOKENS = "max_tokens", "max_tokens (Ollama, vLLM, older servers)"


class ProviderConnection(models.Model):
    """How to reach one provider account. The API key is stored encrypted, never returned."""

    team_lookup = "team"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="provider_connections")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=ProviderKind.choices)
    base_url = models.URLField(blank=True, help_text="Blank for the provider's public endpoint.")
    api_key_encrypted = models.TextField(blank=True, editable=False)
    max_tokens_param = models.CharField(
        max_length=30,
        choices=MaxTokensParam.choices,
        default=MaxTokensParam.MAX_COMPLETION_TOKENS,
        help_text="Name of the output-length field for OpenAI-compatible servers.",
    )
    max_concurrency = models.PositiveIntegerField(
        default=8, validators=[MinValueValidator(1), MaxValueValidator(1000)]
    )
    requests_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Optional client-side rate limit.",
        validators=validation.bounded(0, validation.REQUESTS_PER_MINUTE_MAX),
    )
    timeout_s = models.FloatField(
        default=120.0, validators=[MinValueValidator(1.0), MaxValueValidator(3600.0)]
    )
    options = models.JSONField(
        default=dict,
        blank=True,
        help_text="Kind-specific settings, e.g. for mock: latency_s, failure_rate, seed, "
        "position_bias, noise, fenced_json_rate.",
    )
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="connection_team_name_unique"),
            models.CheckConstraint(
                condition=models.Q(kind__in=ProviderKind.values), name="connection_kind_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    def __repr__(self) -> str:
        # Never put the key, even encrypted, in a repr that may reach a log.
        return f"<ProviderConnection {self.pk} {self.name!r} {self.kind}>"

    def clean(self) -> None:
        from evalplatform.providers.llm.mock import MockSettings

        if not isinstance(self.options, dict):
            raise ValidationError({"options": "Options are an object of names to values."})
        if len(json.dumps(self.options, default=str)) > MAX_OPTIONS_CHARS:
            raise ValidationError(
                {"options": f"Options of at most {MAX_OPTIONS_CHARS:,} characters as JSON."}
            )
        if problem := self.address_problem():
            raise ValidationError({"base_url": problem})
        if self.kind == ProviderKind.MOCK:
            # Each message names its option (``options`` is the form's one field for them).
            problems = MockSettings.problems(self.options)
            if problems:
                raise ValidationError(
                    {"options": [f"{name}: {message}" for name, message in problems.items()]}
                )

    def address_problem(self) -> str | None:
        """Why the platform may not call this connection's base URL, if it may not: its form
        (``netguard.url_problem``), then where its host resolves (a DNS query): an address
        on the platform's own network unless an administrator allows the host. None for the
        provider's public endpoint and for the mock, which calls nothing."""
        if not self.base_url or self.kind == ProviderKind.MOCK:
            return None
        from evalplatform.providers import netguard

        return netguard.url_problem(self.base_url) or netguard.host_problem(self.base_url)

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted)

    @property
    def effective_base_url(self) -> str:
        """The base URL given, else the public endpoint of the kind's provider (its
        adapter's ``default_base_url``; an unknown kind raises ``ValueError``)."""
        if self.base_url:
            return self.base_url.rstrip("/")
        from evalplatform.providers.llm.kinds import adapter_for

        return adapter_for(ProviderKind(self.kind).value).default_base_url.rstrip("/")

    def set_api_key(self, api_key: str) -> None:
        self.api_key_encrypted = crypto.encrypt(api_key) if api_key else ""

    def get_api_key(self) -> str:
        return crypto.decrypt(self.api_key_encrypted) if self.api_key_encrypted else ""


class LLMModel(models.Model):
    """A model reachable through a connection, with its list prices (USD per 1M tokens)."""

    team_lookup = "connection__team"

    connection = models.ForeignKey(
        ProviderConnection, on_delete=models.CASCADE, related_name="models"
    )
    model_id = models.CharField(max_length=200, help_text="The provider's model name.")
    display_name = models.CharField(max_length=200)
    input_price_per_mtok = models.DecimalField(
        max_digits=12, decimal_places=6, default=Decimal(0), validators=[MinValueValidator(0)]
    )
    output_price_per_mtok = models.DecimalField(
        max_digits=12, decimal_places=6, default=Decimal(0), validators=[MinValueValidator(0)]
    )
    batch_discount = models.DecimalField(
        max_digits=4,
        decimal_places=3,
        default=Decimal("0.5"),
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Share taken off both prices for batch requests (0.5 = half price).",
    )
    supports_batch = models.BooleanField(default=False)
    context_window = models.PositiveIntegerField(
        null=True, blank=True, validators=validation.bounded(0, validation.CONTEXT_WINDOW_MAX)
    )
    active = models.BooleanField(default=True)
    catalog_date = models.DateField(
        null=True, blank=True, help_text="Date of the catalog the prices came from."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["connection__name", "display_name"]
        verbose_name = "LLM model"
        constraints = [
            models.UniqueConstraint(
                fields=["connection", "model_id"], name="model_connection_model_id_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(input_price_per_mtok__gte=0, output_price_per_mtok__gte=0),
                name="model_prices_non_negative",
            ),
            models.CheckConstraint(
                condition=models.Q(batch_discount__gte=0, batch_discount__lte=1),
                name="model_batch_discount_share",
            ),
        ]

    def __str__(self) -> str:
        return self.display_name

    @property
    def batch_capable(self) -> bool:
        """Whether requests to this model may go through its provider's batch API: the
        catalog says the model takes batches, and its connection speaks a batch protocol
        (the offline mock speaks none)."""
        from evalplatform.providers.llm.kinds import has_batch_api

        return bool(self.supports_batch) and has_batch_api(self.connection.kind)

    def cost_usd(self, input_tokens: int, output_tokens: int, *, batch: bool = False) -> Decimal:
        factor = (Decimal(1) - self.batch_discount) if batch else Decimal(1)
        per_token = Decimal(1_000_000)
        return (
            (
                Decimal(input_tokens) * self.input_price_per_mtok
                + Decimal(output_tokens) * self.output_price_per_mtok
            )
            * factor
            / per_token
        )
