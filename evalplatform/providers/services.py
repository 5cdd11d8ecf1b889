from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from django.db import transaction

from evalplatform.accounts import policy
from evalplatform.accounts.models import Team
from evalplatform.accounts.roles import PROVIDERS_MANAGE
from evalplatform.errors import FieldErrors, Forbidden
from evalplatform.providers.models import LLMModel, ProviderConnection, ProviderKind

DEFAULT_CATALOG = Path(__file__).resolve().parent / "catalog" / "default_catalog.json"

CONNECTION_FIELDS = {
    "name",
    "kind",
    "base_url",
    "max_tokens_param",
    "max_concurrency",
    "requests_per_minute",
    "timeout_s",
    "active",
}
MODEL_FIELDS = {
    "model_id",
    "display_name",
    "input_price_per_mtok",
    "output_price_per_mtok",
    "batch_discount",
    "supports_batch",
    "context_window",
    "active",
}


def _require_manage(user: Any, team: Team | int) -> None:
    if not policy.has_feature(user, PROVIDERS_MANAGE, team):
        raise Forbidden()


def _unknown(fields: dict[str, Any], allowed: set[str]) -> None:
    extra = set(fields) - allowed
    if extra:
        raise FieldErrors({name: "Unknown field." for name in sorted(extra)})


def connection_create(
    *, user: Any, team: Team, api_key: str = "", **fields: Any
) -> ProviderConnection:
    _require_manage(user, team)
    _unknown(fields, CONNECTION_FIELDS)
    connection = ProviderConnection(team=team, **fields)
    connection.set_api_key(api_key)
    connection.full_clean()
    connection.save()
    return connection


def connection_update(
    *, user: Any, connection: ProviderConnection, api_key: str | None = None, **fields: Any
) -> ProviderConnection:
    """Change fields. ``api_key=None`` keeps the stored key, ``""`` clears it."""
    _require_manage(user, connection.team_id)
    _unknown(fields, CONNECTION_FIELDS)
    if "kind" in fields and fields["kind"] != connection.kind and connection.models.exists():
        raise FieldErrors({"kind": "The kind cannot change while the connection has models."})
    for name, value in fields.items():
        setattr(connection, name, value)
    if api_key is not None:
        connection.set_api_key(api_key)
    connection.full_clean()
    connection.save()
    return connection


def connection_delete(*, user: Any, connection: ProviderConnection) -> None:
    _require_manage(user, connection.team_id)
    connection.delete()


def model_create(*, user: Any, connection: ProviderConnection, **fields: Any) -> LLMModel:
    _require_manage(user, connection.team_id)
    _unknown(fields, MODEL_FIELDS)
    fields.setdefault("display_name", fields.get("model_id", ""))
    model = LLMModel(connection=connection, **fields)
    model.full_clean()
    model.save()
    return model


def model_update(*, user: Any, model: LLMModel, **fields: Any) -> LLMModel:
    _require_manage(user, model.connection.team_id)
    _unknown(fields, MODEL_FIELDS)
    for name, value in fields.items():
        setattr(model, name, value)
    model.full_clean()
    model.save()
    return model


def model_delete(*, user: Any, model: LLMModel) -> None:
    _require_manage(user, model.connection.team_id)
    model.delete()


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
        where = f"models[{index}]"
        try:
            kind = item["kind"]
            if kind not in ProviderKind.values:
                raise ValueError(f"unknown kind {kind!r}")
            entries.append(
                CatalogEntry(
                    kind=kind,
                    model_id=str(item["model_id"]),
                    display_name=str(item.get("display_name") or item["model_id"]),
                    input_price_per_mtok=Decimal(str(item["input"])),
                    output_price_per_mtok=Decimal(str(item["output"])),
                    batch_discount=Decimal(str(item.get("batch_discount", "0.5"))),
                    supports_batch=bool(item.get("supports_batch", False)),
                    context_window=item.get("context_window"),
                )
            )
        except (KeyError, TypeError, ValueError, InvalidOperation) as exc:
            errors[where] = f"Bad catalog entry: {exc}"
    if errors:
        raise FieldErrors(errors)
    return Catalog(as_of=as_of, entries=tuple(entries))


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
