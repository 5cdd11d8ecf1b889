from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import ProtectedError
from django.views.decorators.debug import sensitive_variables

from evalplatform.accounts import policy
from evalplatform.accounts.models import Team
from evalplatform.accounts.roles import PROVIDERS_MANAGE
from evalplatform.errors import Conflict, FieldErrors, Forbidden, validate_instance
from evalplatform.providers.models import LLMModel, ProviderConnection, ProviderKind

DEFAULT_CATALOG = Path(__file__).resolve().parent / "catalog" / "default_catalog.json"

# The fields users may set (the team, connection and API key are handled apart).
CONNECTION_FIELDS = (
    "name",
    "kind",
    "base_url",
    "max_tokens_param",
    "max_concurrency",
    "requests_per_minute",
    "timeout_s",
    "options",
    "active",
)
MODEL_FIELDS = (
    "model_id",
    "display_name",
    "input_price_per_mtok",
    "output_price_per_mtok",
    "batch_discount",
    "supports_batch",
    "context_window",
    "active",
)


def _require_manage(user: Any, team: Team | int) -> None:
    if not policy.has_feature(user, PROVIDERS_MANAGE, team):
        raise Forbidden()


def _unknown(fields: dict[str, Any], allowed: tuple[str, ...]) -> None:
    extra = set(fields) - set(allowed)
    if extra:
        raise FieldErrors({name: "Unknown field." for name in sorted(extra)})


@sensitive_variables("api_key")
def validate_api_key(api_key: str) -> None:
    """A key travels in an HTTP header: printable ASCII without spaces."""
    if api_key and (len(api_key) > 1000 or not all(33 <= ord(ch) <= 126 for ch in api_key)):
        raise FieldErrors(
            {
                "api_key": "An API key is printable ASCII without spaces (check for a pasted "
                "line break), at most 1000 characters."
            }
        )


@sensitive_variables("api_key")
def connection_create(
    *, user: Any, team: Team, api_key: str = "", **fields: Any
) -> ProviderConnection:
    _require_manage(user, team)
    _unknown(fields, CONNECTION_FIELDS)
    validate_api_key(api_key)
    connection = ProviderConnection(team=team, **fields)
    connection.set_api_key(api_key)
    validate_instance(connection, unique_field="name")
    connection.save()
    return connection


@sensitive_variables("api_key")
def connection_update(
    *, user: Any, connection: ProviderConnection, api_key: str | None = None, **fields: Any
) -> ProviderConnection:
    """Change fields. ``api_key=None`` keeps the stored key, ``""`` clears it.

    The stored key is never sent to a new address: changing where the connection points
    (base URL or kind) while keeping a stored key needs the key again.
    """
    _require_manage(user, connection.team_id)
    _unknown(fields, CONNECTION_FIELDS)
    if "kind" in fields and fields["kind"] != connection.kind and connection.models.exists():
        raise FieldErrors({"kind": "The kind cannot change while the connection has models."})
    before = (connection.kind, connection.effective_base_url)
    for name, value in fields.items():
        setattr(connection, name, value)
    if api_key is not None:
        validate_api_key(api_key)
        connection.set_api_key(api_key)
    elif connection.has_api_key and (connection.kind, connection.effective_base_url) != before:
        connection.refresh_from_db()
        raise FieldErrors(
            {
                "api_key": "Give the API key again when changing the base URL or kind: the stored "
                "key is never sent to a new address."
            }
        )
    validate_instance(connection, unique_field="name")
    connection.save()
    return connection


def connection_delete(*, user: Any, connection: ProviderConnection) -> None:
    _require_manage(user, connection.team_id)
    try:
        connection.delete()
    except ProtectedError as exc:
        raise Conflict(
            "Generation jobs or judges use this connection's models: deactivate it instead."
        ) from exc


def model_create(*, user: Any, connection: ProviderConnection, **fields: Any) -> LLMModel:
    _require_manage(user, connection.team_id)
    _unknown(fields, MODEL_FIELDS)
    fields.setdefault("display_name", fields.get("model_id", ""))
    model = LLMModel(connection=connection, **fields)
    validate_instance(model, unique_field="model_id")
    model.save()
    return model


def model_update(*, user: Any, model: LLMModel, **fields: Any) -> LLMModel:
    _require_manage(user, model.connection.team_id)
    _unknown(fields, MODEL_FIELDS)
    for name, value in fields.items():
        setattr(model, name, value)
    validate_instance(model, unique_field="model_id")
    model.save()
    return model


def model_delete(*, user: Any, model: LLMModel) -> None:
    _require_manage(user, model.connection.team_id)
    try:
        model.delete()
    except ProtectedError as exc:
        raise Conflict("Generation jobs or judges use this model: deactivate it instead.") from exc


# --- the dated default catalog ---------------------------------------------------------------


@dataclass(frozen=True)
class CatalogEntry:
    kind: str
    model_id: str
    display_name: str
    input_price_per_mtok: Decimal
    output_price_per_mtok: Decimal
    batch_discount: Decimal
    supports_batch: bool
    context_window: int | None


@dataclass(frozen=True)
class Catalog:
    as_of: date
    entries: tuple[CatalogEntry, ...]

    def for_kind(self, kind: str) -> list[CatalogEntry]:
        return [entry for entry in self.entries if entry.kind == kind]


def catalog_read(path: Path | None = None) -> Catalog:
    """Parse and check a catalog file; errors name the entry and field."""
    path = path or DEFAULT_CATALOG
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FieldErrors({"file": f"Cannot read catalog {path}: {exc}"}) from exc
    errors: dict[str, str] = {}
    try:
        as_of = date.fromisoformat(str(raw.get("as_of")))
    except ValueError:
        errors["as_of"] = "The catalog needs an ISO date in 'as_of'."
        as_of = date.min
    entries: list[CatalogEntry] = []
    for index, item in enumerate(raw.get("models") or []):
        try:
            entries.append(_catalog_entry(item))
        except (KeyError, TypeError, ValueError, InvalidOperation) as exc:
            errors[f"models[{index}]"] = f"Bad catalog entry: {exc}"
    if errors:
        raise FieldErrors(errors)
    return Catalog(as_of=as_of, entries=tuple(entries))


def _catalog_entry(item: dict[str, Any]) -> CatalogEntry:
    """One catalog entry, checked against the same bounds as the model's fields."""
    kind = item["kind"]
    if kind not in ProviderKind.values:
        raise ValueError(f"unknown kind {kind!r}")
    model_id = str(item["model_id"]).strip()
    if not model_id or len(model_id) > 200:
        raise ValueError("model_id must have 1 to 200 characters")
    prices = Decimal(str(item["input"])), Decimal(str(item["output"]))
    discount = Decimal(str(item.get("batch_discount", "0.5")))
    if any(not price.is_finite() or price < 0 or price >= 10**6 for price in prices):
        raise ValueError("prices must be between 0 and 999999.999999 USD per 1M tokens")
    if not discount.is_finite() or not 0 <= discount <= 1:
        raise ValueError("batch_discount must be between 0 and 1")
    window = item.get("context_window")
    if window is not None and (
        not isinstance(window, int) or isinstance(window, bool) or not 0 < window < 2**31
    ):
        raise ValueError("context_window must be a positive integer or null")
    return CatalogEntry(
        kind=kind,
        model_id=model_id,
        display_name=str(item.get("display_name") or model_id)[:200],
        input_price_per_mtok=prices[0],
        output_price_per_mtok=prices[1],
        batch_discount=discount,
        supports_batch=bool(item.get("supports_batch", False)),
        context_window=window,
    )


def catalog_load(
    *, team: Team, connection: ProviderConnection | None = None, path: Path | None = None
) -> dict[str, int]:
    """Create or update the catalog's models on the team's connections of the matching kind.

    Prices and flags are refreshed; ``active`` and display names a user changed are kept.
    """
    catalog = catalog_read(path)
    connections = (
        [connection]
        if connection is not None
        else list(ProviderConnection.objects.filter(team=team))
    )
    counts = {"created": 0, "updated": 0}
    with transaction.atomic():
        for conn in connections:
            existing = {m.model_id: m for m in conn.models.all()}
            for entry in catalog.for_kind(conn.kind):
                values = {
                    "input_price_per_mtok": entry.input_price_per_mtok,
                    "output_price_per_mtok": entry.output_price_per_mtok,
                    "batch_discount": entry.batch_discount,
                    "supports_batch": entry.supports_batch,
                    "context_window": entry.context_window,
                    "catalog_date": catalog.as_of,
                }
                model = existing.get(entry.model_id)
                if model is None:
                    LLMModel.objects.create(
                        connection=conn,
                        model_id=entry.model_id,
                        display_name=entry.display_name,
                        **values,
                    )
                    counts["created"] += 1
                else:
                    for name, value in values.items():
                        setattr(model, name, value)
                    model.save()
                    counts["updated"] += 1
    return counts


# --- test a connection ------------------------------------------------------------------------

_HINTS = {
    "auth": "The provider refused the API key: check it, or store a new one.",
    "permission": "The key may not use this model or endpoint: check the account's access.",
    "not_found": "Not found: check the model id and the base URL.",
    "quota": "The account has no quota or credit left: check its plan and billing.",
    "rate_limit": "The provider is rate limiting this key: try again in a moment.",
    "overloaded": "The provider is overloaded: try again in a moment.",
    "server": "The provider had an internal error: try again; if it persists, check its status.",
    "timeout": "No answer in time: check the base URL, or raise the connection's timeout.",
    "connection": "Could not connect: check the base URL and that the server is reachable.",
    "bad_request": "The provider rejected the request: check the model id and the connection kind.",
    "malformed": "The reply was not in the expected format: is the kind right for this server?",
    "content_filter": "The provider's content filter blocked the test prompt.",
}
TEST_PROMPT = "Reply with the single word OK."


@sensitive_variables("api_key")
def connection_test(
    *, user: Any, connection: ProviderConnection, model_id: str = ""
) -> dict[str, Any]:
    """Send one tiny request through the connection; report latency or an actionable error.

    Never runs inside a transaction. The key is redacted from anything the provider echoes.
    """
    from asgiref.sync import async_to_sync

    from evalplatform.providers.llm.client import ProviderClient
    from evalplatform.providers.llm.retry import RetryPolicy
    from evalplatform.providers.llm.types import LLMRequest, ProviderError

    _require_manage(user, connection.team_id)
    if not model_id:
        model = connection.models.filter(active=True).order_by("pk").first()
        if model is None:
            raise FieldErrors({"model": "The connection has no active model: add one or name it."})
        model_id = model.model_id
    api_key = connection.get_api_key()

    async def call():
        client = ProviderClient.for_connection(connection, retry=RetryPolicy(max_retries=0))
        try:
            return await client.complete(
                LLMRequest(model=model_id, user=TEST_PROMPT, max_tokens=16, temperature=0)
            )
        finally:
            await client.aclose()

    try:
        result = async_to_sync(call)()
    except ProviderError as error:
        message = error.message.replace(api_key, "[redacted]") if api_key else error.message
        return {
            "ok": False,
            "model": model_id,
            "error_kind": error.kind,
            "status": error.status,
            "message": message[:500],
            "hint": _HINTS.get(error.kind, "The call failed."),
        }
    return {
        "ok": True,
        "model": model_id,
        "latency_ms": round(result.response.latency_s * 1000, 1),
        "reply": result.response.text[:200],
        "input_tokens": result.response.input_tokens,
        "output_tokens": result.response.output_tokens,
    }
